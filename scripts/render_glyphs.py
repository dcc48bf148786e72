"""Render characters as 28x28 gray images, one class per character: a data set of glyphs.

    render_glyphs.py CHARS COUNT OUT_DIR SEED [--test COUNT]

writes OUT_DIR/{train,test}_{x,y}.npy (x: uint8 [N, 1, 28, 28], y: int64 class = position of the
character in CHARS) and OUT_DIR/grid.png (the first 128 training images). Each image draws its
character in one of the DejaVu faces (Sans, Serif, Mono, condensed, bold, oblique) at a random
size, stroke width, slant and rotation, fits it into a 20x20 box centred by its centre of mass in
a 28x28 field (the layout of MNIST), blurs it slightly and bends it with a smooth random
displacement field (elastic distortion, as Simard et al. 2003 used on handwritten digits), so that
it looks hand-drawn rather than printed. Classes are balanced (each split holds COUNT / classes of each, in a random order); the
images are a function of CHARS, the counts and SEED alone.

Used by scripts/transfer_experiment.sh: Latin letters and digits as the source data set, Greek
capitals as the target.
"""

import argparse
import glob
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from scipy.ndimage import gaussian_filter, map_coordinates


def fonts():
    found = sorted(
        f
        for f in glob.glob("/usr/share/fonts/truetype/dejavu/*.ttf")
        if "Math" not in os.path.basename(f) and "ExtraLight" not in os.path.basename(f)
    )
    if not found:
        raise SystemExit(
            "render_glyphs: no DejaVu fonts in /usr/share/fonts/truetype/dejavu "
            "(install fonts-dejavu-core and fonts-dejavu-extra: scripts/setup)"
        )
    return found


def render(ch, faces, rng):
    font = ImageFont.truetype(faces[rng.integers(len(faces))], int(rng.integers(40, 64)))
    im = Image.new("L", (96, 96), 0)
    ImageDraw.Draw(im).text((48, 48), ch, fill=255, font=font, anchor="mm")
    stroke = int(rng.integers(0, 3))  # 0: as drawn, 1: bolder, 2: bolder still half the time
    if stroke >= 1:
        im = im.filter(ImageFilter.MaxFilter(3 if stroke == 1 or rng.random() >= 0.5 else 5))
    slant = rng.uniform(-0.3, 0.3)
    im = im.transform(im.size, Image.AFFINE, (1, slant, -slant * 48, 0, 1, 0), Image.BILINEAR)
    im = im.rotate(rng.uniform(-15, 15), Image.BILINEAR)
    a = np.asarray(im)
    ys, xs = np.nonzero(a > 30)
    a = a[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
    h, w = a.shape
    s = 20.0 / max(h, w) * rng.uniform(0.8, 1.0)
    sx = s * rng.uniform(0.75, 1.1)
    g = Image.fromarray(a).resize((max(1, round(w * sx)), max(1, round(h * s))), Image.LANCZOS)
    g = g.filter(ImageFilter.GaussianBlur(rng.uniform(0, 0.6)))
    a = np.asarray(g).astype(np.float32)
    field = np.zeros((28, 28), np.float32)
    cy, cx = np.array(np.nonzero(a)).mean(1) if a.any() else (a.shape[0] / 2, a.shape[1] / 2)
    oy = min(max(int(round(14 - cy + rng.normal(0, 1))), 0), 28 - a.shape[0])
    ox = min(max(int(round(14 - cx + rng.normal(0, 1))), 0), 28 - a.shape[1])
    field[oy : oy + a.shape[0], ox : ox + a.shape[1]] = a
    dy = gaussian_filter(rng.uniform(-1, 1, (28, 28)), 4) * 34
    dx = gaussian_filter(rng.uniform(-1, 1, (28, 28)), 4) * 34
    yy, xx = np.meshgrid(np.arange(28), np.arange(28), indexing="ij")
    field = map_coordinates(field, [yy + dy, xx + dx], order=1)
    return np.clip(field, 0, 255).astype(np.uint8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("chars")
    p.add_argument("count", type=int, help="training images")
    p.add_argument("out")
    p.add_argument("seed", type=int)
    p.add_argument("--test", type=int, default=0, help="test images (default: a tenth of COUNT)")
    a = p.parse_args()
    faces, rng = fonts(), np.random.default_rng(a.seed)
    n_test = a.test or a.count // 10
    # As many images of each class as possible (COUNT / classes, the remainder to the first), shuffled.
    y = np.concatenate([rng.permutation(np.arange(n) % len(a.chars)) for n in (a.count, n_test)])
    x = np.stack([render(a.chars[k], faces, rng) for k in y])[:, None]
    os.makedirs(a.out, exist_ok=True)
    for name, arr in (
        ("train_x", x[:a.count]),
        ("train_y", y[:a.count].astype(np.int64)),
        ("test_x", x[a.count :]),
        ("test_y", y[a.count :].astype(np.int64)),
    ):
        np.save(os.path.join(a.out, name + ".npy"), np.ascontiguousarray(arr))
    rows = [np.concatenate(list(x[r * 16 : (r + 1) * 16, 0]), 1) for r in range(min(8, len(x) // 16))]
    if rows:
        Image.fromarray(np.concatenate(rows, 0)).save(os.path.join(a.out, "grid.png"))
    print(f"{a.out}: {a.count} + {n_test} images of {len(a.chars)} classes, {len(faces)} faces")


if __name__ == "__main__":
    main()
