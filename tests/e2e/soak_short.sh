#!/usr/bin/env bash
# soak_short.sh: the long-session soak (tests/soak/soak.sh) cut to 300 turns, so make test checks
# every bad command's answer, the file descriptors and the final reply in a few seconds; the
# full 10,000 turns with memory figures is `make soak`.
set -u
source "$(dirname "$0")/common.bash"
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
exec tests/soak/soak.sh --turns 300 --bin "$BIN"
