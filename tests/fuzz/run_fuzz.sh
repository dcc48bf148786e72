#!/usr/bin/env bash
# Runs one libFuzzer target of build-fuzz/ (tests/fuzz/fuzzers.cmake): the ctest tests of
# tests/fuzz/fuzz_tests.cmake call it, and it works by hand the same way.
#
#   tests/fuzz/run_fuzz.sh TARGET SECONDS [WORKDIR]
#   tests/fuzz/run_fuzz.sh fuzz_json 0          # replay the seed corpus and regressions only
#   tests/fuzz/run_fuzz.sh fuzz_infer_codec 600 # ten minutes of fuzzing
#
# 1. Builds the fuzz targets (scripts/build --fuzz, under a lock: the tests of several targets
#    may start at once); exits 77 (skipped) when clang's libFuzzer is not installed.
# 2. Replays tests/fuzz/corpus/TARGET and tests/fuzz/regressions/TARGET, each input once.
# 3. When SECONDS > 0, fuzzes that long on a copy of the corpus in WORKDIR (default
#    build-fuzz/work/TARGET, emptied first; the committed corpus is never written), with the
#    dictionary tests/fuzz/TARGET.dict when there is one. Crash, leak, timeout and out-of-memory
#    inputs land in WORKDIR/artifacts/.
# Exits 1 on any crash, sanitizer report, leak, timeout (GB_FUZZ_TIMEOUT s per input, 10), memory
# over GB_FUZZ_RSS_MB (2048) or a single allocation over GB_FUZZ_MALLOC_MB (256: inputs are a few
# KB, so that is an amplification bug), and whenever an artifact was written. GB_FUZZ_NO_BUILD=1 skips step 1; GB_FUZZ_BUILD_DIR (build-fuzz) moves it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if (($# < 2)); then
  sed -n '5,7p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
  exit 2
fi
target="$1"
seconds="$2"
BUILD_DIR="${GB_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
work="${3:-$BUILD_DIR/work/$target}"
rss_mb="${GB_FUZZ_RSS_MB:-2048}"
malloc_mb="${GB_FUZZ_MALLOC_MB:-256}"
timeout_s="${GB_FUZZ_TIMEOUT:-10}"
corpus="$ROOT/tests/fuzz/corpus/$target"
regressions="$ROOT/tests/fuzz/regressions/$target"
dict="$ROOT/tests/fuzz/$target.dict"
bin="$BUILD_DIR/tests/fuzz/$target"

if [[ ! -d "$corpus" ]]; then
  echo "run_fuzz: no seed corpus $corpus" >&2
  exit 2
fi

# 1. Build. libFuzzer comes with clang's compiler-rt (Debian: libclang-rt-14-dev).
if [[ "${GB_FUZZ_NO_BUILD:-0}" != 1 ]]; then
  if ! command -v clang++ >/dev/null; then
    echo "run_fuzz: SKIPPED: no clang++ (libFuzzer needs clang: apt-get install clang libclang-rt-14-dev)"
    exit 77
  fi
  rtdir="$(clang++ -print-runtime-dir 2>/dev/null || true)"
  if ! compgen -G "$rtdir/libclang_rt.fuzzer*.a" >/dev/null && ! compgen -G "$rtdir/*/libclang_rt.fuzzer*.a" >/dev/null; then
    echo "run_fuzz: SKIPPED: clang++ has no libFuzzer runtime in '$rtdir' (apt-get install libclang-rt-14-dev)"
    exit 77
  fi
  mkdir -p "$BUILD_DIR"
  (
    flock 9
    GB_BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/build" --fuzz >"$BUILD_DIR/build-$target.log" 2>&1 ||
      { cat "$BUILD_DIR/build-$target.log" >&2; echo "run_fuzz: scripts/build --fuzz failed" >&2; exit 1; }
    tail -n 1 "$BUILD_DIR/build-$target.log"
  ) 9>"$BUILD_DIR/.build.lock"
fi
if [[ ! -x "$bin" ]]; then
  echo "run_fuzz: no $bin (is $target listed in tests/fuzz/fuzzers.cmake? build: scripts/build --fuzz)" >&2
  exit 1
fi

# The sanitizers' settings are ours, not the caller's (scripts/test --asan turns leaks off).
export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# libFuzzer's own exit code for a finding is 77, ctest's "skipped": ask for 1.
common=(-error_exitcode=1 -timeout_exitcode=1 -rss_limit_mb="$rss_mb" -malloc_limit_mb="$malloc_mb" -timeout="$timeout_s")

# 2. Replay: every committed input once (inputs given as files are run, never written).
mapfile -t inputs < <(find "$corpus" "$regressions" -type f 2>/dev/null | sort)
echo "run_fuzz: $target: replaying ${#inputs[@]} inputs (corpus and regressions)"
if ! "$bin" "${common[@]}" "${inputs[@]}" >"$BUILD_DIR/replay-$target.log" 2>&1; then
  cat "$BUILD_DIR/replay-$target.log"
  echo "run_fuzz: $target FAILED on a committed input (above); replay one: $bin FILE" >&2
  exit 1
fi
if ((seconds <= 0)); then
  echo "run_fuzz: $target: replay passed"
  exit 0
fi

# 3. Fuzz on a scratch copy of the corpus.
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp -R "$corpus/." "$work/corpus/"
extra=()
[[ -f "$dict" ]] && extra+=(-dict="$dict")
echo "run_fuzz: $target: fuzzing ${seconds} s in $work (limits: ${rss_mb} MB rss, ${malloc_mb} MB per allocation, ${timeout_s} s per input)"
set +e
"$bin" "${common[@]}" "${extra[@]}" -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/fuzz.log" 2>&1
rc=$?
set -e
mapfile -t artifacts < <(find "$work/artifacts" -type f | sort)
# The last status line: "#N DONE cov: C ft: F corp: K/S ... exec/s: E rss: R"
grep -E '^#[0-9]+' "$work/fuzz.log" | tail -n 1 || true
grep -E '^stat::' "$work/fuzz.log" || true
if ((rc != 0 || ${#artifacts[@]} > 0)); then
  tail -n 80 "$work/fuzz.log"
  echo "run_fuzz: $target FAILED (exit status $rc); artifacts:" >&2
  for a in "${artifacts[@]}"; do echo "  $a  (replay: $bin $a)" >&2; done
  exit 1
fi
echo "run_fuzz: $target passed: corpus now $(find "$work/corpus" -type f | wc -l) inputs (full log: $work/fuzz.log)"
