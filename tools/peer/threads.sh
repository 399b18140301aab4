#!/bin/sh
# threads.sh: decode speed with the default thread count against --threads 1, on a quiet machine
# and with one competing busy process, alternated in one window.
#
#   tools/peer/threads.sh GPT2_DIR [ROUNDS] [OUT.jsonl] [TOKENTOP ...]
#
# GPT2_DIR is a model with GPT-2 124M shapes (build/tools/mkmodel DIR --size gpt2 --tokenizer
# tests/fixtures/gpt2 --eos 50256). Each round runs, for every binary given (default ./tokentop),
# every model (the embedded kjv-target, the kjv-target + kjv-draft pair, GPT2_DIR), every load
# (quiet, busy) and both thread settings (default, --threads 1), interleaved so that a change in
# the machine's load hits every variant alike; the two thread settings run back to back, and
# the ratio of each such pair is reported beside the medians. The busy load is one `yes >/dev/null` left to
# the scheduler (pinned nowhere), started before and stopped after each run. Prints the median,
# min and max decode tok/s of each cell. Run it under `flock /tmp/tokentop-bench.lock`.
#
# Environment: GPT2_TOKENS (default 32) tokens decoded on GPT2_DIR (200, as on the small models,
# is what a user meets; 32 weighs the start-up more); NICE (default 0) the niceness of tokentop
# and of the busy process, e.g. -10 on a shared machine so that other work there yields to both.
set -eu
[ $# -ge 1 ] || { sed -n 4p "$0" >&2; exit 2; }
GPT2=$1 ROUNDS=${2:-5} OUT=${3:-/tmp/tokentop-threads.jsonl}
shift $(($# < 3 ? $# : 3))
[ $# -gt 0 ] || set -- ./tokentop
: >"$OUT"
PROMPT="And God said"
GPT2_TOKENS=${GPT2_TOKENS:-32} NICE=${NICE:-0}
run() {     # binary model-label threads-label load-label args...
    bin=$1 label=$2 th=$3 ld=$4
    shift 4
    busy=
    if [ "$ld" = busy ]; then
        nice -n "$NICE" yes >/dev/null &
        busy=$!
        sleep 0.2
    fi
    set -- "$@"
    [ "$th" = 1 ] && set -- "$@" --threads 1
    s=$(nice -n "$NICE" "$bin" generate "$@" --seed 1 --ignore-eos --json -q 2>/dev/null | tail -n 1)
    [ -n "$busy" ] && kill "$busy" && wait "$busy" 2>/dev/null || true
    printf '{"bin":"%s","model":"%s","threads":"%s","load":"%s","summary":%s}\n' \
        "$bin" "$label" "$th" "$ld" "$s" >>"$OUT"
}
for r in $(seq "$ROUNDS"); do
    for ld in quiet busy; do
        for bin in "$@"; do
            for th in default 1; do     # back to back: the ratio compares neighbours
                run "$bin" target "$th" "$ld" -p "$PROMPT" -n 200
            done
            for th in default 1; do
                run "$bin" pair "$th" "$ld" -p "$PROMPT" -n 200 --draft models/kjv-draft
            done
            for th in default 1; do
                run "$bin" gpt2 "$th" "$ld" --model "$GPT2" -p "$PROMPT" -n "$GPT2_TOKENS"
            done
        done
    done
done
/usr/bin/python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bins = list(dict.fromkeys(r["bin"] for r in rows))
def cell(v, fmt):
    return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}..{fmt.format(max(v))}]" if v else "-"
print("decode tok/s, median [range]; ratio = default / --threads 1 in the same round")
print(f"{'model':7} {'load':6} {'threads':8} " + " ".join(f"{b[-30:]:>30}" for b in bins))
for m in ("target", "pair", "gpt2"):
    for ld in ("quiet", "busy"):
        get = lambda b, th: [r["summary"]["decode_tok_s"] for r in rows
                             if (r["bin"], r["model"], r["load"], r["threads"]) == (b, m, ld, th)]
        for th in ("default", "1"):
            print(f"{m:7} {ld:6} {th:8} " + " ".join(f"{cell(get(b, th), '{:.0f}'):>30}"
                                                    for b in bins))
        ratios = [[d / o for d, o in zip(get(b, "default"), get(b, "1"))] for b in bins]
        print(f"{m:7} {ld:6} {'ratio':8} " + " ".join(f"{cell(r, '{:.2f}'):>30}" for r in ratios))
EOF
