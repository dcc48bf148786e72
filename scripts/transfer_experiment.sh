#!/usr/bin/env bash
# Transfer learning, measured (docs/models.md#transfer-learning-measured).
#
#   scripts/transfer_experiment.sh GLASSBOX [WORKDIR] [SEED_LIST]
#   scripts/transfer_experiment.sh build/glassbox/cli/glassbox /tmp/transfer "1 2 3"
#
# 1. Pretrain a ResNet-18 (small stem, width 16) on Fashion-MNIST classes 0-4 (T-shirt, Trouser,
#    Pullover, Dress, Coat): the first 6000 of their 30 000 training images, 3 epochs.
# 2. For each seed, train on 500 images of the OTHER classes 5-9 (Sandal, Shirt, Sneaker, Bag,
#    Ankle boot; 100 each, relabelled 0-4, drawn with that seed), two ways with the same budget
#    (15 epochs, AdamW, OneCycle, batch 32, no validation split: the last weights are tested):
#      finetune: model.init_from = the pretrained checkpoint, trainer.freeze_fraction = 0.7
#      scratch:  fresh weights, everything trained
# 3. Test both on the 5000 test images of classes 5-9 (glassbox eval: accuracy, macro F1) and
#    print mean +- standard deviation over the seed values, and the margin, into WORKDIR/results.md.
#
# Runtime: 39 min for seed values 1 2 3 on the 2-core machine while other builds shared it
# (pretraining 16 min, each fine-tuning 1 min, each run from scratch 4-7 min). Data from
# /usr/share/datasets/fashion-mnist (FASHION=DIR to change). Numbers come from glassbox; Python
# (the repository's .venv) only writes the npy files and averages the results.
set -euo pipefail

GB="$(realpath "${1:?usage: transfer_experiment.sh GLASSBOX [WORKDIR] [SEED_LIST]}")"
WORK="${2:-/tmp/transfer}"
SEED_LIST="${3:-1 2 3}"
FASHION="${FASHION:-/usr/share/datasets/fashion-mnist}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
mkdir -p "$WORK"
cd "$WORK"
start=$(date +%s)

# --- data: npy files [N, 1, 28, 28] uint8, labels int64 -----------------------------------
"$PY" - "$FASHION" "$SEED_LIST" <<'EOF'
import gzip, os, sys
import numpy as np

root, seed_list = sys.argv[1], [int(s) for s in sys.argv[2].split()]

def idx(name):
    p = os.path.join(root, name)
    raw = open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
    off = 16 if raw[3] == 3 else 8
    a = np.frombuffer(raw, np.uint8, offset=off)
    return a.reshape(-1, 1, 28, 28) if off == 16 else a.astype(np.int64)

xtr, ytr = idx("train-images-idx3-ubyte"), idx("train-labels-idx1-ubyte")
xte, yte = idx("t10k-images-idx3-ubyte"), idx("t10k-labels-idx1-ubyte")

def save(d, tx, ty, vx, vy):
    os.makedirs(d, exist_ok=True)
    for n, a in (("train_x", tx), ("train_y", ty), ("test_x", vx), ("test_y", vy)):
        np.save(os.path.join(d, n + ".npy"), np.ascontiguousarray(a))

# pretraining: classes 0-4, shuffled once (data.limit_train keeps the first N)
a, b = ytr < 5, yte < 5
order = np.random.default_rng(0).permutation(int(a.sum()))
save("pretrain-data", xtr[a][order], ytr[a][order], xte[b], yte[b])

# fine-tuning: 100 training images of each of classes 5-9 per seed, relabelled 0-4;
# the test set is every test image of classes 5-9
b = yte >= 5
for s in seed_list:
    rng = np.random.default_rng(1000 + s)
    pick = np.concatenate([rng.choice(np.flatnonzero(ytr == c), 100, replace=False) for c in range(5, 10)])
    pick = rng.permutation(pick)
    save(f"target-data-{s}", xtr[pick], ytr[pick] - 5, xte[b], yte[b] - 5)
print("npy files written")
EOF

COMMON=(--set trainer.enable_progress_bar=false --set trainer.enable_model_summary=false
        --set diagnostics.probe_every_n_steps=0 --set diagnostics.tensorboard=false --overwrite)
MODEL=(--set model.name=resnet18 --set model.resnet18.stem=small --set model.resnet18.width=16)

# --- 1. pretraining ------------------------------------------------------------------------
t0=$(date +%s)
"$GB" train "${MODEL[@]}" "${COMMON[@]}" --run-dir runs/pretrain \
  --set data.format=npy --set data.root=pretrain-data --set data.limit_train=6000 \
  --set data.val_size=500 --set data.eval_batch_size=1000 \
  --set data.loader.batch_size=64 --set trainer.max_epochs=3 --set trainer.seed=42 \
  --set optim.name=adamw --set optim.lr=0.003 --set optim.weight_decay=0.01 \
  --set scheduler.name=onecycle --set scheduler.interval=step --set scheduler.pct_start=0.2 \
  | grep -E "^test accuracy|epochs, "
echo "pretraining: $(( $(date +%s) - t0 )) s"

# --- 2. fine-tuning vs training from scratch -----------------------------------------------
for s in $SEED_LIST; do
  for arm in finetune scratch; do
    extra=()
    if [ "$arm" = finetune ]; then
      extra=(--set model.init_from=runs/pretrain/checkpoints/last.ckpt --set trainer.freeze_fraction=0.7)
    fi
    t0=$(date +%s)
    "$GB" train "${MODEL[@]}" "${COMMON[@]}" "${extra[@]}" --run-dir "runs/$arm-$s" \
      --set data.format=npy --set data.root="target-data-$s" --set data.val_size=0 \
      --set data.eval_batch_size=1000 --set data.loader.batch_size=32 \
      --set trainer.max_epochs=15 --set trainer.seed="$s" \
      --set optim.name=adamw --set optim.lr=0.003 --set optim.weight_decay=0.0001 \
      --set scheduler.name=onecycle --set scheduler.interval=step --set scheduler.pct_start=0.3 \
      | grep -E "^test accuracy" || true
    "$GB" eval --checkpoint "runs/$arm-$s/checkpoints/last.ckpt" --json > "runs/$arm-$s/test-metrics.json"
    echo "$arm seed $s: $(( $(date +%s) - t0 )) s"
  done
done

# --- 3. the figures ------------------------------------------------------------------------
"$PY" - "$SEED_LIST" "$(( $(date +%s) - start ))" <<'EOF' | tee results.md
import json, sys
import numpy as np
seed_list, seconds = sys.argv[1].split(), int(sys.argv[2])

def fig(arm, key):
    out = []
    for s in seed_list:
        m = json.load(open(f"runs/{arm}-{s}/test-metrics.json"))
        out.append(m["accuracy"] if key == "accuracy" else m["averages"]["macro"]["f1"])
    return np.array(out)

print(f"| arm (500 images, 15 epochs, {len(seed_list)} seed values) | test accuracy | test macro F1 |")
print("|---|---|---|")
for arm, name in (("finetune", "pretrained, 70 % frozen"), ("scratch", "from scratch")):
    a, f = fig(arm, "accuracy"), fig(arm, "f1")
    print(f"| {name} | {a.mean():.3f} ± {a.std(ddof=1) if len(a) > 1 else 0:.3f} "
          f"| {f.mean():.3f} ± {f.std(ddof=1) if len(f) > 1 else 0:.3f} |")
da = fig("finetune", "accuracy") - fig("scratch", "accuracy")
df = fig("finetune", "f1") - fig("scratch", "f1")
print(f"\nmargin (fine-tuned - scratch, per seed): accuracy {' '.join(f'{x:+.3f}' for x in da)} "
      f"(mean {da.mean():+.3f}); macro F1 {' '.join(f'{x:+.3f}' for x in df)} (mean {df.mean():+.3f})")
print(f"seed values: {' '.join(seed_list)}; wall time {seconds} s")
EOF
