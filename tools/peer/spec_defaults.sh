#!/bin/sh
# spec_defaults.sh: speculative decoding at the defaults a user meets, against plain decoding.
#
#   [MODEL=DIR] [DRAFT=DIR] tools/peer/spec_defaults.sh [TOKENTOP] [REPS]
#
# For 5 prompts x REPS (default 3), sampling (the target's generation_config) and greedy, runs
# `generate -n 200 --ignore-eos` plain and then with `--draft models/kjv-draft` (default threads,
# default gamma), back to back, and prints the median ratio of their decode tok/s with the
# interquartile range, the plain speed and the acceptance (accepted / drafted). MODEL and DRAFT
# name another pair (e.g. a candidate draft). Run it from the repository root under
# `flock /tmp/tokentop-bench.lock`.
set -eu
B=${1:-./tokentop} R=${2:-3}
MODEL=${MODEL:-models/kjv-target} DRAFT=${DRAFT:-models/kjv-draft}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
field() { /usr/bin/python3 -c 'import json,sys
d=json.loads(sys.stdin.read().strip().splitlines()[-1])
print(d["decode_tok_s"], d.get("accepted", 0) / max(1, d.get("drafted", 0)))'; }
for r in $(seq "$R"); do
    for p in "And God said" "The LORD is my shepherd" "In the beginning" "Blessed are the meek" \
             "And Jesus answered"; do
        for mode in sample greedy; do
            g=
            [ "$mode" = greedy ] && g=--greedy
            a=$("$B" generate --model "$MODEL" -p "$p" -n 200 --ignore-eos --seed "$r" $g --json \
                -q | field)
            b=$("$B" generate --model "$MODEL" -p "$p" -n 200 --ignore-eos --seed "$r" $g --json \
                -q --draft "$DRAFT" | field)
            echo "$mode $a $b" >>"$out"
        done
    done
done
/usr/bin/python3 - "$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for m in ("sample", "greedy"):
    sel = [x for x in rows if x[0] == m]
    r = [float(x[3]) / float(x[1]) for x in sel]
    q = st.quantiles(r, n=4)
    print("%-6s %d runs: speculative / plain %.2f (IQR %.2f-%.2f, range %.2f-%.2f); plain %.0f tok/s, "
          "speculative %.0f; accepted per drafted %.2f" % (m, len(r), st.median(r), q[0], q[2], min(r),
          max(r), st.median(float(x[1]) for x in sel), st.median(float(x[3]) for x in sel),
          st.median(float(x[4]) for x in sel)))
PY
