#!/usr/bin/env bash
# repl_defaults.sh: the terminal REPL's status bar, speculative against plain, as a person reads it.
#
#   [PACE=N] [MODE=sample|greedy] tools/peer/repl_defaults.sh [TOKENTOP] [REPS]
#
# Starts the full-screen REPL in a private tmux server (100x30) on the embedded pair at the
# models' generation_config (MODE=greedy adds /greedy) and the given pace (default 20, what
# `make run` passes). For the 5 prompts of spec_defaults.sh x REPS seeds (default 3) it runs each
# prompt as a plain turn and then as a speculative one (/spec off, /spec on), each from /reset so
# both run at the same context, reads the tokens/s the status bar shows after each turn and prints
# the median ratio with its interquartile range and range, and the median speeds. Each turn
# generates the REPL's default 200 tokens (or stops at end of text). Run it from the repository
# root, with nothing else running, under `flock /tmp/tokentop-bench.lock`.
set -u
B=${1:-./tokentop} R=${2:-3}
PACE=${PACE:-20} MODE=${MODE:-sample}
command -v tmux >/dev/null || { echo "repl_defaults.sh: needs tmux" >&2; exit 1; }
sock=ttrepl$$
out=$(mktemp)
T() { tmux -L "$sock" "$@"; }
trap 'T kill-server 2>/dev/null; rm -f "$out"' EXIT
T -f /dev/null new-session -d -x 100 -y 30 -s d \
    "$B --model models/kjv-target --draft models/kjv-draft --spec off --pace $PACE"
for _ in $(seq 100); do T capture-pane -p -t d 2>/dev/null | grep -q 'Send a message' && break; sleep 0.1; done
cmd() { T send-keys -t d -l -- "$1"; T send-keys -t d Enter; sleep 0.4; }
# a turn: wait until the status bar stops saying "generating", then read its tokens/s
turn() {
    cmd "/reset"
    T send-keys -t d -l -- "$1"; T send-keys -t d Enter; sleep 0.3
    for _ in $(seq 1200); do T capture-pane -p -t d | grep -q 'generating' || break; sleep 0.25; done
    T capture-pane -p -t d | grep -Eo '[0-9.]+ tok/s' | tail -1 | cut -d' ' -f1
}
[ "$MODE" = greedy ] && cmd "/greedy"
for r in $(seq "$R"); do
    for p in "And God said" "The LORD is my shepherd" "In the beginning" "Blessed are the meek" \
             "And Jesus answered"; do
        cmd "/seed $r"; cmd "/spec off"; a=$(turn "$p")
        cmd "/seed $r"; cmd "/spec on"; b=$(turn "$p")
        echo "$a $b" >>"$out"
    done
done
/usr/bin/python3 - "$out" "$MODE" "$PACE" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 2]
r = [float(b) / float(a) for a, b in rows]
q = st.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
print("REPL %s, pace %s, %d turn pairs: status bar speculative / plain %.2f (IQR %.2f-%.2f, "
      "range %.2f-%.2f); plain %.0f tok/s, speculative %.0f" % (sys.argv[2], sys.argv[3], len(r),
      st.median(r), q[0], q[2], min(r), max(r), st.median(float(a) for a, b in rows),
      st.median(float(b) for a, b in rows)))
PY
