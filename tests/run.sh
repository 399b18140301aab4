#!/usr/bin/env bash
# Runs every Check program given on the command line, the fuzzers' regression step (when FUZZ_DIR is
# set), then every tests/e2e/*.sh script, and prints one summary line. Exit status 1 if anything failed. BUILD and BIN come from the Makefile.
set -u
failed=()
for t in "$@"; do
    echo "== $(basename "$t")"
    if ! "$t"; then failed+=("$(basename "$t")"); fi
done
# The fuzzers in regression mode: every committed corpus input replayed, a few seconds of fuzzing
# (tests/fuzz/run.sh says SKIPPED when clang is missing).
if [ -n "${FUZZ_DIR:-}" ]; then
    echo "== fuzz (regression)"
    if ! FUZZ_DIR="$FUZZ_DIR" tests/fuzz/run.sh; then failed+=("fuzz"); fi
fi
for s in tests/e2e/*.sh; do
    [ -e "$s" ] || continue
    echo "== e2e $(basename "$s")"
    if ! BUILD="$BUILD" BIN="$BIN" bash "$s"; then failed+=("e2e/$(basename "$s")"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all tests passed"
