#!/usr/bin/env bash
# Transfer learning, measured (docs/models.md#transfer-learning-measured).
#
#   scripts/transfer_experiment.sh GLASSBOX [WORKDIR] [SEED_LIST]
#   scripts/transfer_experiment.sh build/glassbox/cli/glassbox /tmp/transfer "1 2 3"
#
# The question: does a backbone that glassbox pretrained on one data set, fine-tuned with 70 % of
# its parameters frozen, beat training from scratch on 500 images of another data set, with the
# same fine-tuning budget?
#
# The data (scripts/render_glyphs.py: characters drawn in the 20 DejaVu faces at random sizes,
# stroke widths, slants and rotations, bent by elastic distortion so that they look hand-drawn;
# 28x28 gray, laid out as MNIST):
#   source: the 62 Latin letters and digits (0-9, A-Z, a-z), 40 000 training images;
#   target: 10 Greek capitals that Latin lacks (Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi
#           Omega): for each seed value 500 training images (50 a class, drawn with that seed),
#           and, shared by all seed values, 1000 validation images (used only to pick each arm's
#           learning rate) and 3000 test images.
# The source shares strokes, curves and corners with the target, not one class.
#
# 1. Pretrain a small CNN (3 stages of conv-BN-ReLU-maxpool, 32/64/128 channels, a 32-wide
#    hidden layer: 130 k parameters, of which the 3 convolutions with their BatchNorm layers are
#    71.2 %) on the source,
#    PRETRAIN_EPOCHS (3) epochs, AdamW, OneCycle, batch 64. The hidden layer is 32 wide so that
#    freeze_fraction = 0.7 freezes the convolutions: 128 wide, the first linear layer alone would
#    hold 61 % of the parameters and 0.7 would freeze 99.7 %.
# 2. For each budget in BUDGETS (2, 5 and 15 epochs), each learning rate in LRS (0.001 0.003
#    0.01 0.03: OneCycle's max_lr) and each seed value, train two arms on the seed value's 500
#    images, AdamW (weight decay 1e-4), OneCycle, batch 32, no validation split, the last weights
#    kept:
#      finetune: model.init_from = the pretrained checkpoint, trainer.freeze_fraction = 0.7 (the
#                three convolutions frozen, their BatchNorm layers in eval mode, the default
#                trainer.frozen_bn_eval = true); model.init_head = false, so the head starts
#                fresh (it would not fit anyway: 62 classes against 10); the hidden layer starts
#                from the source model's;
#      scratch:  fresh weights, everything trained.
# 3. Each run is evaluated by glassbox eval on the validation images and on the test images.
#    Per budget and arm, the learning rate with the best mean validation accuracy over the seed
#    values is that arm's (the learning rate is tuned for both arms alike, on data that is not
#    the test set); its test accuracy and macro F1 (mean +- standard deviation over the seed
#    values) and the margin finetune - scratch go to WORKDIR/results.md, with the whole grid.
#
# Runtime: 8.2 min for seed values 1 2 3 on the quiet 2-vCPU machine (data 65 s, pretraining 56 s,
# 72 fine-tuning runs of 4-9 s, each with its two evaluations). An existing
# WORKDIR/runs/pretrain is reused: REPRETRAIN=1 (or another WORKDIR) after changing the source or
# the model. PER_CLASS, PRETRAIN_EPOCHS, BUDGETS and LRS can be set in the environment. Numbers
# come from glassbox; Python (the repository's .venv) only draws the images and averages results.
set -euo pipefail

GB="$(realpath "${1:?usage: transfer_experiment.sh GLASSBOX [WORKDIR] [SEED_LIST]}")"
WORK="${2:-/tmp/transfer}"
SEED_LIST="${3:-1 2 3}"
PER_CLASS="${PER_CLASS:-50}"        # target training images per class (500 in all)
PRETRAIN_EPOCHS="${PRETRAIN_EPOCHS:-3}"
BUDGETS="${BUDGETS:-2 5 15}"        # fine-tuning epochs, the same for both arms
LRS="${LRS:-0.001 0.003 0.01 0.03}" # OneCycle max_lr grid, the same for both arms
SOURCE_CHARS="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
TARGET_CHARS="ΓΔΘΛΞΠΣΦΨΩ"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
RENDER=("$PY" "$ROOT/scripts/render_glyphs.py")
mkdir -p "$WORK"
cd "$WORK"
start=$(date +%s)

# --- data ----------------------------------------------------------------------------------
[ -e source/train_x.npy ] || "${RENDER[@]}" "$SOURCE_CHARS" 40000 source 11
[ -e heldout/train_x.npy ] || "${RENDER[@]}" "$TARGET_CHARS" 1000 heldout 12 --test 3000
for s in $SEED_LIST; do
  [ -e "drawn-$s/train_x.npy" ] || "${RENDER[@]}" "$TARGET_CHARS" $((PER_CLASS * 10)) "drawn-$s" $((100 + s)) --test 10
done
"$PY" - "$SEED_LIST" <<'EOF'
import os, shutil, sys
# target-S: the seed value's training images, the shared test images; val: the validation
# images as the test split (what glassbox eval --set data.root=val reads).
for s in sys.argv[1].split():
    os.makedirs(f"target-{s}", exist_ok=True)
    for n in ("train_x", "train_y"):
        shutil.copy(f"drawn-{s}/{n}.npy", f"target-{s}/{n}.npy")
    for n in ("test_x", "test_y"):
        shutil.copy(f"heldout/{n}.npy", f"target-{s}/{n}.npy")
os.makedirs("val", exist_ok=True)
for a, b in (("train_x", "test_x"), ("train_y", "test_y")):
    shutil.copy(f"heldout/{a}.npy", f"val/{a}.npy")
    shutil.copy(f"heldout/{a}.npy", f"val/{b}.npy")
EOF
echo "data: $(( $(date +%s) - start )) s"

COMMON=(--set trainer.enable_progress_bar=false --set trainer.enable_model_summary=false
        --set diagnostics.probe_every_n_steps=0 --set diagnostics.tensorboard=false --overwrite
        --set data.format=npy --set data.eval_batch_size=1000 --set optim.name=adamw
        --set scheduler.name=onecycle --set scheduler.interval=step)
MODEL=(--set model.name=cnn --set "model.cnn.channels=[32,64,128]" --set model.cnn.convs_per_stage=1
       --set model.cnn.norm=batchnorm --set model.cnn.hidden=32 --set model.cnn.dropout=0)

# --- 1. pretraining ------------------------------------------------------------------------
t0=$(date +%s)
if [ ! -e runs/pretrain/checkpoints/last.ckpt ] || [ "${REPRETRAIN:-0}" = 1 ]; then
  "$GB" train "${MODEL[@]}" "${COMMON[@]}" --run-dir runs/pretrain --set data.root=source \
    --set data.val_size=1000 --set data.loader.batch_size=64 --set trainer.max_epochs="$PRETRAIN_EPOCHS" \
    --set trainer.seed=42 --set optim.lr=0.003 --set optim.weight_decay=0.01 --set scheduler.pct_start=0.2 \
    | grep -E "^test accuracy|epochs, " || true
fi
echo "pretraining: $(( $(date +%s) - t0 )) s"

# --- 2. fine-tuning vs training from scratch, per budget, learning rate and seed value ------
for ep in $BUDGETS; do
  for lr in $LRS; do
    for s in $SEED_LIST; do
      for arm in finetune scratch; do
        extra=()
        [ "$arm" = finetune ] && extra=(--set model.init_from=runs/pretrain/checkpoints/last.ckpt
                                        --set trainer.freeze_fraction=0.7 --set model.init_head=false)
        run="runs/$arm-e$ep-lr$lr-$s"
        t0=$(date +%s)
        "$GB" train "${MODEL[@]}" "${COMMON[@]}" "${extra[@]}" --run-dir "$run" \
          --set data.root="target-$s" --set data.val_size=0 --set data.loader.batch_size=32 \
          --set trainer.max_epochs="$ep" --set trainer.seed="$s" --set optim.lr="$lr" \
          --set optim.weight_decay=0.0001 --set scheduler.pct_start=0.3 >/dev/null
        "$GB" eval --checkpoint "$run/checkpoints/last.ckpt" --json --out "$run/eval-test" > "$run/test-metrics.json"
        "$GB" eval --checkpoint "$run/checkpoints/last.ckpt" --json --out "$run/eval-val" \
          --set data.root=val > "$run/val-metrics.json"
        echo "$arm, $ep epochs, lr $lr, seed $s: $(( $(date +%s) - t0 )) s"
      done
    done
  done
done

# --- 3. the figures ------------------------------------------------------------------------
"$PY" - "$SEED_LIST" "$BUDGETS" "$LRS" "$(( $(date +%s) - start ))" <<'EOF' | tee results.md
import json, sys
import numpy as np
seeds, budgets, lrs = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3].split()
seconds = int(sys.argv[4])
NAMES = {"finetune": "pretrained, 70 % frozen", "scratch": "from scratch"}

def fig(arm, ep, lr, split, key="accuracy"):
    out = []
    for s in seeds:
        m = json.load(open(f"runs/{arm}-e{ep}-lr{lr}-{s}/{split}-metrics.json"))
        out.append(m["accuracy"] if key == "accuracy" else m["averages"]["macro"]["f1"])
    return np.array(out)

def sd(a):
    return a.std(ddof=1) if len(a) > 1 else 0.0

best = {(arm, ep): max(lrs, key=lambda lr: fig(arm, ep, lr, "val").mean()) for arm in NAMES for ep in budgets}
print(f"| budget | arm (500 images, {len(seeds)} seed values) | max_lr (best validation) | test accuracy | test macro F1 |")
print("|---|---|---|---|---|")
for ep in budgets:
    for arm in NAMES:
        lr = best[(arm, ep)]
        a, f = fig(arm, ep, lr, "test"), fig(arm, ep, lr, "test", "f1")
        print(f"| {ep} epochs | {NAMES[arm]} | {lr} | {a.mean():.3f} ± {sd(a):.3f} | {f.mean():.3f} ± {sd(f):.3f} |")
print()
for ep in budgets:
    da = fig("finetune", ep, best[("finetune", ep)], "test") - fig("scratch", ep, best[("scratch", ep)], "test")
    df = (fig("finetune", ep, best[("finetune", ep)], "test", "f1")
          - fig("scratch", ep, best[("scratch", ep)], "test", "f1"))
    print(f"margin at {ep} epochs (finetune - scratch, each at its learning rate, per seed value): accuracy "
          f"{' '.join(f'{x:+.3f}' for x in da)} (mean {da.mean():+.3f}); macro F1 "
          f"{' '.join(f'{x:+.3f}' for x in df)} (mean {df.mean():+.3f})")
print()
print("The whole grid: mean test accuracy (mean validation accuracy) over the seed values")
print()
print("| budget | arm | " + " | ".join(f"max_lr {lr}" for lr in lrs) + " |")
print("|---|---|" + "---|" * len(lrs))
for ep in budgets:
    for arm in NAMES:
        cells = [f"{fig(arm, ep, lr, 'test').mean():.3f} ({fig(arm, ep, lr, 'val').mean():.3f})" for lr in lrs]
        print(f"| {ep} epochs | {NAMES[arm]} | " + " | ".join(cells) + " |")
print()
print(f"seed values: {' '.join(seeds)}; wall time {seconds} s")
EOF
