#!/bin/sh
# compare.sh: alternates `tokentop bench` and llama_bench in one window and prints the medians.
#
#   tools/peer/compare.sh HF_DIR GGUF_DIR LLAMA_BENCH [ROUNDS] [OUT.jsonl]
#
# GGUF_DIR holds the same model as HF_DIR in GGUF: gpt2-f32.gguf, gpt2-f16.gguf and
# gpt2-q8_0.gguf (tools/peer/README.md says how to make them); a dtype whose file is missing is
# skipped. DTYPES (default "fp32 fp16 q8") picks the dtypes; each round runs, for each of them,
# tokentop then llama.cpp (256 prompt tokens, 128 generated, THREADS=2 threads), so a change in
# the machine's load hits both engines alike. A dtype tokentop refuses (q8 before it has it) is
# measured for llama.cpp alone. TOKENTOP (default ./tokentop) is the binary; LIBDIR, where
# llama_bench must load the CPU kernels at run time (the prebuilt npm build), is passed as
# --libdir; LLAMA_Q8_ARGS are added to llama_bench's q8 runs (--no-extra-bufts where the AMX
# path fails, see README.md). Not run by make: it needs a llama.cpp build (tools/peer/build_native.sh).
set -eu
[ $# -ge 3 ] || { sed -n 4p "$0" >&2; exit 2; }
HF=$1 GG=$2 LB=$3 ROUNDS=${4:-5} OUT=${5:-/tmp/peer-compare.jsonl}
TOKENTOP=${TOKENTOP:-./tokentop} DTYPES=${DTYPES:-fp32 fp16 q8} THREADS=${THREADS:-2}
gguf() { case $1 in fp32) echo "$GG/gpt2-f32.gguf" ;; fp16) echo "$GG/gpt2-f16.gguf" ;;
                    q8) echo "$GG/gpt2-q8_0.gguf" ;; *) echo "$GG/gpt2-$1.gguf" ;; esac; }
: >"$OUT"
load() { cut -d' ' -f1 /proc/loadavg; }
refused=
for r in $(seq "$ROUNDS"); do
    for dt in $DTYPES; do
        g=$(gguf "$dt")
        [ -f "$g" ] || { [ "$r" -gt 1 ] || echo "compare.sh: no $g: $dt skipped" >&2; continue; }
        l0=$(load)
        t=null
        case " $refused " in
        *" $dt "*) ;;
        *)  if ! t=$("$TOKENTOP" bench --model "$HF" --dtype "$dt" --threads "$THREADS" --json \
                     2>/tmp/peer-compare.err); then
                echo "compare.sh: tokentop bench --dtype $dt failed, measuring llama.cpp alone:" \
                     "$(head -c 200 /tmp/peer-compare.err)" >&2
                refused="$refused $dt" t=null
            fi ;;
        esac
        extra=
        [ "$dt" = q8 ] && extra=${LLAMA_Q8_ARGS:-}
        # shellcheck disable=SC2086 # extra is a list of options
        l=$("$LB" "$g" ${LIBDIR:+--libdir "$LIBDIR"} $extra -t "$THREADS" -p 256 -n 128 \
            --json 2>/dev/null)
        printf '{"round":%s,"dtype":"%s","load1":%s,"tokentop":%s,"llama":%s}\n' \
            "$r" "$dt" "$l0" "$t" "$l" >>"$OUT"
    done
done
/usr/bin/python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
loads = [r["load1"] for r in rows]
print(f"{max(r['round'] for r in rows)} rounds, load average (1 min) {min(loads):.2f}.."
      f"{max(loads):.2f}, median {statistics.median(loads):.2f}")
def spread(v, fmt):
    return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}..{fmt.format(max(v))}]"
print(f"{'dtype':6} {'engine':9} {'prefill tok/s':>26} {'TTFT ms':>24} {'decode tok/s':>24}")
for dt in dict.fromkeys(r["dtype"] for r in rows):
    sel = [r for r in rows if r["dtype"] == dt]
    for eng in ("tokentop", "llama"):
        got = [r[eng] for r in sel if r[eng]]
        if not got:
            print(f"{dt:6} {eng:9} {'-':>26}")
            continue
        print(f"{dt:6} {eng:9} {spread([g['prefill_tok_s'] for g in got], '{:.1f}'):>26} "
              f"{spread([g['ttft_ms'] for g in got], '{:.1f}'):>24} "
              f"{spread([g['decode_tok_s'] for g in got], '{:.1f}'):>24}")
    both = [r for r in sel if r["tokentop"] and r["llama"]]
    if both:
        ratio = lambda k: spread([r["tokentop"][k] / r["llama"][k] for r in both], "{:.2f}")
        print(f"{dt:6} {'ratio':9} {ratio('prefill_tok_s'):>26} {ratio('ttft_ms'):>24} "
              f"{ratio('decode_tok_s'):>24}   (tokentop / llama.cpp per round: median [range])")
EOF
