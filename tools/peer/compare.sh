#!/bin/sh
# compare.sh: alternates `tokentop bench` and llama_bench in one window and prints the medians.
#
#   tools/peer/compare.sh HF_DIR F32.gguf F16.gguf LLAMA_BENCH LIBDIR [ROUNDS] [OUT.jsonl]
#
# Each round runs tokentop fp32, llama.cpp F32, tokentop fp16, llama.cpp F16 (256 prompt
# tokens, 128 generated, 2 threads), so a change in the machine's load hits both engines alike.
# Not run by make: it needs the llama.cpp build described in tools/peer/README.md.
set -eu
[ $# -ge 5 ] || { sed -n 4p "$0" >&2; exit 2; }
HF=$1 G32=$2 G16=$3 LB=$4 LIBDIR=$5 ROUNDS=${6:-5} OUT=${7:-/tmp/peer-compare.jsonl}
TOKENTOP=${TOKENTOP:-./tokentop}
: >"$OUT"
load() { cut -d' ' -f1 /proc/loadavg; }
for r in $(seq "$ROUNDS"); do
    for dt in fp32 fp16; do
        g=$G32; [ "$dt" = fp16 ] && g=$G16
        l0=$(load)
        t=$("$TOKENTOP" bench --model "$HF" --dtype "$dt" --threads 2 --json 2>/dev/null)
        l=$("$LB" "$g" --libdir "$LIBDIR" -t 2 -p 256 -n 128 --json 2>/dev/null)
        printf '{"round":%s,"dtype":"%s","load1":%s,"tokentop":%s,"llama":%s}\n' \
            "$r" "$dt" "$l0" "$t" "$l" >>"$OUT"
    done
done
/usr/bin/python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{len(rows)//2} rounds, load average (1 min) {min(r['load1'] for r in rows):.2f}.."
      f"{max(r['load1'] for r in rows):.2f}, median {statistics.median(r['load1'] for r in rows):.2f}")
print(f"{'dtype':6} {'engine':9} {'prefill tok/s':>14} {'TTFT ms':>9} {'decode tok/s':>13}")
for dt in ("fp32", "fp16"):
    sel = [r for r in rows if r["dtype"] == dt]
    for eng in ("tokentop", "llama"):
        med = lambda k: statistics.median(r[eng][k] for r in sel)
        print(f"{dt:6} {eng:9} {med('prefill_tok_s'):14.1f} {med('ttft_ms'):9.1f} "
              f"{med('decode_tok_s'):13.1f}")
    ratio = lambda k: statistics.median(r["tokentop"][k] / r["llama"][k] for r in sel)
    print(f"{dt:6} {'ratio':9} {ratio('prefill_tok_s'):14.2f} {ratio('ttft_ms'):9.2f} "
          f"{ratio('decode_tok_s'):13.2f}   (tokentop / llama.cpp, median of per-round ratios)")
EOF
