#!/usr/bin/env bash
# Runs the libFuzzer harnesses built under $FUZZ_DIR (default build/fuzz; `make fuzz-build` makes
# them), one target after another.
#   tests/fuzz/run.sh [TARGET...]                 regression (make test): replay every committed
#       input in tests/fuzz/corpus/<target>, then fuzz from there for FUZZ_TEST_SECONDS (default 2)
#       into a temporary directory, so every input that ever crashed stays fixed
#   tests/fuzz/run.sh --long SECONDS [TARGET...]  make fuzz: fuzz each target for SECONDS, keeping
#       new inputs in $FUZZ_DIR/corpus/<target>, crashes in $FUZZ_DIR/crashes/ and libFuzzer's
#       output in $FUZZ_DIR/logs/<target>.log
# A crash prints libFuzzer's report and the input's file; add that file to the target's corpus
# (any name not starting with "seed-") and a named Check test for the fix. Without clang the step
# is skipped, saying so.
set -u
cd "$(dirname "$0")/../.."
FUZZ_DIR=${FUZZ_DIR:-build/fuzz}
long=0 seconds=${FUZZ_TEST_SECONDS:-2}
if [ "${1:-}" = "--long" ]; then
    long=1 seconds=$2
    shift 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do
        t=${f#tests/fuzz/fuzz_}
        targets+=("${t%.c}")
    done
fi

if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || ! tools/deps.sh --fuzz --check 2>/dev/null; then
    echo "fuzz: SKIPPED: clang or its libFuzzer runtime is not installed (tools/deps.sh --fuzz)"
    exit 0
fi

tmp=$(mktemp -d /tmp/tokentop-fuzz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=()
for t in "${targets[@]}"; do
    bin=$FUZZ_DIR/fuzz_$t
    seeds=tests/fuzz/corpus/$t
    if [ ! -x "$bin" ]; then
        echo "fuzz $t: $bin is missing (make fuzz-build)"
        failed+=("$t")
        continue
    fi
    args=(-timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1)
    [ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
    out=$tmp/$t
    [ $long -eq 1 ] && out=$FUZZ_DIR/corpus/$t
    mkdir -p "$out" "$FUZZ_DIR/crashes"
    args+=(-artifact_prefix="$FUZZ_DIR/crashes/$t-")
    log=$tmp/$t.log
    [ $long -eq 1 ] && mkdir -p "$FUZZ_DIR/logs" && log=$FUZZ_DIR/logs/$t.log
    if "$bin" "${args[@]}" -max_total_time="$seconds" "$out" "$seeds" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
        echo "fuzz $t: ok, $(ls "$seeds" | wc -l) corpus inputs replayed, $runs runs, $cov edges"
    else
        echo "fuzz $t: FAILED"
        grep -v '^#\|^INFO\|^MERGE\|^stat::' "$log" | tail -n 40
        ls "$FUZZ_DIR"/crashes/"$t"-* 2>/dev/null
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}"
    exit 1
fi
