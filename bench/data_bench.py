"""The Python anchor of `glassbox bench data`: albumentations, torchvision and DataLoader figures.

    python bench/data_bench.py transforms --root DIR --names HorizontalFlip,Rotate --window 1 --repeats 3
    python bench/data_bench.py loader --root DIR --mode pipeline --workers 2 --window 1 --repeats 3

`transforms`: single-thread images/s of every named albumentations transform (p=1, its default
parameters; sizes that need a value are 224) on the decoded RGB uint8 images under DIR, and of
torchvision.transforms.v2 where it has the transform (on CHW uint8 tensors). Each figure is the
best of `repeats` windows of `window` seconds, counting only the time inside the transform, after a warm-up.
`loader`: torch.utils.data.DataLoader(num_workers=W, batch_size=32, shuffle=True,
persistent_workers=True) over a Dataset that reads a file, decodes it with cv2 (BGR -> RGB) and,
in pipeline mode, applies RandomResizedCrop(224) + HorizontalFlip + Normalize and makes a CHW float32
tensor (decode mode: a CHW uint8 tensor). The first batches are not measured (worker start-up).
Prints one JSON object on stdout; progress goes to stderr.
"""

import argparse
import glob
import json
import os
import sys
import time

import cv2

cv2.setNumThreads(0)

import albumentations as A  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

SIZE = 224


def image_files(root):
    return sorted(glob.glob(os.path.join(root, "train", "*", "*.jpg")))


def read_rgb(path):
    with open(path, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def albumentations_transform(name):
    sizes = {
        "Resize": dict(height=SIZE, width=SIZE),
        "CenterCrop": dict(height=SIZE, width=SIZE),
        "RandomCrop": dict(height=SIZE, width=SIZE),
        "RandomResizedCrop": dict(size=(SIZE, SIZE)),
        "SmallestMaxSize": dict(max_size=SIZE),
        "LongestMaxSize": dict(max_size=SIZE),
    }
    return getattr(A, name)(p=1.0, **sizes.get(name, {}))


# torchvision's counterparts, with albumentations' default parameters where the two share them.
# GaussianBlur needs a fixed kernel size in torchvision: 13, the size albumentations picks for the
# middle of its default sigma range (int(3.5 * 1.75) * 2 + 1).
def torchvision_transform(name):
    make = {
        "HorizontalFlip": lambda: v2.RandomHorizontalFlip(p=1.0),
        "VerticalFlip": lambda: v2.RandomVerticalFlip(p=1.0),
        "Rotate": lambda: v2.RandomRotation(degrees=90),
        "Affine": lambda: v2.RandomAffine(degrees=0),
        "GaussianBlur": lambda: v2.GaussianBlur(kernel_size=13, sigma=(0.5, 3.0)),
        "ColorJitter": lambda: v2.ColorJitter(brightness=0.2, contrast=0.2, saturation=0.2, hue=0.5),
        "Normalize": lambda: v2.Compose(
            [v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
        ),
        "Resize": lambda: v2.Resize((SIZE, SIZE)),
        "CenterCrop": lambda: v2.CenterCrop(SIZE),
        "RandomResizedCrop": lambda: v2.RandomResizedCrop(SIZE),
        "Equalize": lambda: v2.RandomEqualize(p=1.0),
        "Solarize": lambda: v2.RandomSolarize(threshold=128, p=1.0),
        "ToGray": lambda: v2.Grayscale(num_output_channels=3),
    }
    return make[name]() if name in make else None


def best_rate(fn, inputs, window, repeats):
    """Best of `repeats` windows (`window` s of wall time) of images/s, counting only the time inside fn."""
    for x in inputs[:8]:
        fn(x)
    best = 0.0
    for _ in range(repeats):
        spent, n, i = 0.0, 0, 0
        w0 = time.perf_counter()
        while n < 3 or time.perf_counter() - w0 < window:
            x = inputs[i % len(inputs)]
            t0 = time.perf_counter()
            fn(x)
            spent += time.perf_counter() - t0
            n += 1
            i += 1
        best = max(best, n / spent)
    return best


def run_transforms(args):
    torch.set_num_threads(1)
    images = [read_rgb(f) for f in image_files(args.root)[: args.images]]
    tensors = [torch.from_numpy(im).permute(2, 0, 1).contiguous() for im in images]
    out = {}
    for name in args.names.split(","):
        entry = {}
        try:
            t = albumentations_transform(name)
            entry["albumentations"] = best_rate(lambda im: t(image=im)["image"], images, args.window, args.repeats)
        except Exception as e:  # a transform albumentations does not have, or refuses these defaults
            entry["albumentations"] = None
            entry["albumentations_error"] = f"{type(e).__name__}: {e}"
        tv = torchvision_transform(name)
        entry["torchvision"] = best_rate(tv, tensors, args.window, args.repeats) if tv is not None else None
        out[name] = entry
        print(f"  python {name}: {entry}", file=sys.stderr, flush=True)
    return out


class FileDataset(torch.utils.data.Dataset):
    """Reads and decodes a file per item; `transform`: an albumentations Compose, or None (decode only)."""

    def __init__(self, files, transform):
        self.files = files
        self.transform = transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = read_rgb(self.files[i])
        if self.transform is None:
            return torch.from_numpy(img).permute(2, 0, 1), i % 2
        img = self.transform(image=img)["image"]
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), i % 2


def worker_init(_):
    cv2.setNumThreads(0)


def run_loader(args):
    files = image_files(args.root)
    transform = None
    if args.mode == "pipeline":
        transform = A.Compose([A.RandomResizedCrop(size=(SIZE, SIZE)), A.HorizontalFlip(), A.Normalize()])
    loader = torch.utils.data.DataLoader(
        FileDataset(files, transform),
        batch_size=32,
        shuffle=True,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
        worker_init_fn=worker_init,
    )

    def batches():
        while True:
            for b in loader:
                yield b

    it = batches()
    for _ in range(args.skip_batches):  # worker start-up and the first fill of the queues
        next(it)
    best = 0.0
    for _ in range(args.repeats):
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.window:
            x, _ = next(it)
            n += x.shape[0]
        best = max(best, n / (time.perf_counter() - t0))
    return {"images_per_s": best}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["transforms", "loader"])
    p.add_argument("--root", required=True)
    p.add_argument("--names", default="HorizontalFlip")
    p.add_argument("--images", type=int, default=16, help="distinct images the transforms cycle through")
    p.add_argument("--mode", choices=["pipeline", "decode"], default="pipeline")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--skip-batches", type=int, default=4)
    p.add_argument("--window", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    result = run_transforms(args) if args.what == "transforms" else run_loader(args)
    result = {"result": result, "albumentations": A.__version__, "torchvision": torchvision.__version__,
              "torch": torch.__version__, "cv2": cv2.__version__}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
