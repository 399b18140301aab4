#!/usr/bin/env bash
# gguf_speed.sh: tokentop against llama.cpp on the same GGUF files, alternated in one window
# (issue 24 section 5): prefill, time to first token and decode (the `tokentop bench`
# protocol), peak resident memory, and the time to the first token of a fresh process.
#
#   tools/peer/gguf_speed.sh ROUNDS OUT.jsonl FILE.gguf...
#
# Each round runs, for each file in turn: `tokentop bench --model FILE` (its default threads)
# and tools/peer/llama_bench on the same file with the thread count tokentop reports (256
# prompt tokens, 128 generated, llama.cpp's defaults: F16 KV cache, flash attention auto,
# repacked weights), each under /usr/bin/time -v (peak RSS); then a cold start of each: a new
# process that loads the file and prints one greedy token after a 16-token prompt
# (`tokentop generate --ids ... -n 1` and `llama_logits --ids ... --gen 1`), timed from exec to
# exit. The file stays in the page cache between runs (nothing drops it), so "cold" means a
# fresh process, not a cold disk. UPSTREAM=1 also runs llama.cpp's own llama-bench
# (-p 256 -n 128 -r 1) for each file. Prints medians [min..max] and per-round ratios.
#
# Environment: TOKENTOP [./tokentop], LLAMA_DIR [tools/peer/work] (llama_bench, llama_logits,
# llama.cpp/build/bin), LLAMA_ARGS (added to llama_bench, e.g. --no-extra-bufts), THREADS (both
# engines run that many; default: tokentop's choice, given to llama.cpp too). On a loaded
# machine use THREADS=1: ggml's spinning barrier waits a scheduler slice per graph node when its
# threads are preempted (a 2-thread llama_bench at load average 11 on 2 cores ran 6 minutes on
# one 1B F16 file), which measures the oversubscription rather than the engine.
# Not run by make: it needs a llama.cpp build (tools/peer/build_native.sh).
set -u
[ $# -ge 3 ] || { sed -n 5p "$0" >&2; exit 2; }
ROUNDS=$1 OUT=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TOKENTOP=${TOKENTOP:-$ROOT/tokentop}
LLAMA_DIR=${LLAMA_DIR:-$HERE/work}
LB=$LLAMA_DIR/llama_bench LL=$LLAMA_DIR/llama_logits
UB=$LLAMA_DIR/llama.cpp/build/bin/llama-bench
PY=/usr/bin/python3
for f in "$TOKENTOP" "$LB" "$LL"; do
    [ -x "$f" ] || { echo "gguf_speed: $f: not found or not executable" >&2; exit 2; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PROMPT=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16
: >"$OUT"

# timed CMD...: runs it under /usr/bin/time -v; stdout in $TMP/out, and sets rss_kb, wall_s
timed() {
    /usr/bin/time -v -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$TMP/time")
    wall_s=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$TMP/time" |
             awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    [ $rc -eq 0 ] || echo "gguf_speed: $1 failed: $(head -c 300 "$TMP/err")" >&2
    return $rc
}
load() { cut -d' ' -f1 /proc/loadavg; }

for r in $(seq "$ROUNDS"); do
    for g in "$@"; do
        l0=$(load)
        tt=null ll=null ub=null threads=${THREADS:-2}
        if timed "$TOKENTOP" bench --model "$g" ${THREADS:+--threads "$THREADS"} --json; then
            tt=$(cat "$TMP/out")
            threads=$(printf '%s' "$tt" | $PY -c 'import json,sys; print(json.load(sys.stdin)["threads"])')
            tt=$(printf '%s' "$tt" | $PY -c "import json,sys; d=json.load(sys.stdin); d['rss_kb']=$rss_kb; print(json.dumps(d))")
        fi
        # shellcheck disable=SC2086 # LLAMA_ARGS is a list of options
        if timed "$LB" "$g" -t "$threads" -p 256 -n 128 --json ${LLAMA_ARGS:-}; then
            ll=$(printf '%s' "$(cat "$TMP/out")" | $PY -c "import json,sys; d=json.load(sys.stdin); d['rss_kb']=$rss_kb; print(json.dumps(d))")
        fi
        if [ "${UPSTREAM:-0}" = 1 ] &&
           timed "$UB" -m "$g" -t "$threads" -p 256 -n 128 -r 1 -o json; then
            ub=$($PY -c 'import json,sys
rows = json.load(open(sys.argv[1]))
d = {("prefill_tok_s" if r["n_prompt"] else "decode_tok_s"): r["avg_ts"] for r in rows}
print(json.dumps(d))' "$TMP/out")
        fi
        tt_cold=null ll_cold=null
        timed "$TOKENTOP" generate --model "$g" --ids "$PROMPT" -n 1 --greedy --threads "$threads" -q &&
            tt_cold=$wall_s
        # shellcheck disable=SC2086
        timed "$LL" "$g" --ids "$PROMPT" --gen 1 -t "$threads" --kv f16 --extra-bufts &&
            ll_cold=$wall_s
        printf '{"round":%s,"file":"%s","load1":%s,"threads":%s,"tokentop":%s,"llama":%s,"llama_bench_upstream":%s,"cold_s":{"tokentop":%s,"llama":%s}}\n' \
            "$r" "$g" "$l0" "$threads" "$tt" "$ll" "$ub" "$tt_cold" "$ll_cold" >>"$OUT"
    done
done

$PY - "$OUT" <<'EOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
loads = [r["load1"] for r in rows]
print(f"{max(r['round'] for r in rows)} rounds, load average (1 min) {min(loads):.2f}.."
      f"{max(loads):.2f}, median {statistics.median(loads):.2f}; threads "
      f"{sorted(set(r['threads'] for r in rows))}")
def spread(v, fmt="{:.1f}"):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    f = fmt.format
    return f"{f(statistics.median(v))} [{f(min(v))}..{f(max(v))}]"
hdr = ("file", "engine", "prefill tok/s", "TTFT ms", "decode tok/s", "peak RSS MB", "cold start s")
print(f"{hdr[0]:22} {hdr[1]:9} {hdr[2]:>24} {hdr[3]:>24} {hdr[4]:>22} {hdr[5]:>20} {hdr[6]:>18}")
for path in dict.fromkeys(r["file"] for r in rows):
    sel = [r for r in rows if r["file"] == path]
    name = os.path.basename(path)[:22]
    for eng in ("tokentop", "llama"):
        got = [r[eng] for r in sel if r[eng]]
        cold = [r["cold_s"][eng] for r in sel]
        if not got:
            print(f"{name:22} {eng:9} {'-':>24}")
            continue
        print(f"{name:22} {eng:9} {spread([g['prefill_tok_s'] for g in got]):>24} "
              f"{spread([g['ttft_ms'] for g in got]):>24} "
              f"{spread([g['decode_tok_s'] for g in got]):>22} "
              f"{spread([g['rss_kb'] / 1024 for g in got], '{:.0f}'):>20} "
              f"{spread(cold, '{:.2f}'):>18}")
    up = [r["llama_bench_upstream"] for r in sel if r["llama_bench_upstream"]]
    if up:
        print(f"{name:22} {'llama-bench':9} {spread([u.get('prefill_tok_s') for u in up]):>24} "
              f"{'':>24} {spread([u.get('decode_tok_s') for u in up]):>22}")
    both = [r for r in sel if r["tokentop"] and r["llama"]]
    if both:
        rt = lambda k: spread([r["tokentop"][k] / r["llama"][k] for r in both], "{:.2f}")
        cr = spread([r["cold_s"]["tokentop"] / r["cold_s"]["llama"] for r in both
                     if r["cold_s"]["tokentop"] and r["cold_s"]["llama"]], "{:.2f}")
        print(f"{name:22} {'ratio':9} {rt('prefill_tok_s'):>24} {rt('ttft_ms'):>24} "
              f"{rt('decode_tok_s'):>22} {rt('rss_kb'):>20} {cr:>18}")
print("ratio = tokentop / llama.cpp in the same round: median [range]")
EOF
