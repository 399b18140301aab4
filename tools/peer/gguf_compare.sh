#!/usr/bin/env bash
# gguf_compare.sh: tokentop against llama.cpp on the same GGUF files (issue 24 section 4).
#
#   tools/peer/gguf_compare.sh WORKDIR [ARCH...]          (default: llama qwen2 qwen3 gpt2)
#
# For each architecture: a random model (build/tools/mkmodel, GPT-2's tokenizer; its final norm
# multiplied by SHARPEN (tools/peer/sharpen.py), which multiplies the logits, so the distributions
# are as peaked as a trained model's instead of nearly flat), written as GGUF F32
# (tools/peer/hf_to_gguf.py) and quantized by llama-quantize to each of TYPES; then
#   (a) F32: tokentop's greedy continuation of the first 16 ids of TEXT equals llama.cpp's
#       (GEN ids, --ignore-eos), and teacher-forced over the ids of TEXT the two engines'
#       probabilities differ by at most TOL anywhere in the vocabulary;
#   (b) the model as its Hugging Face directory (--dtype fp32) and as the F32 GGUF give
#       tokentop the same greedy ids;
#   (c) each quantized type: mean KL(F32 || quantized) over the positions of TEXT, tokentop's
#       (its F32 file against its quantized file) and llama.cpp's (the same), and their ratio.
# The tokenizations are compared too (tokentop tokenize against llama_tokenize on TEXT).
#
# Environment (defaults in brackets):
#   TOKENTOP [./tokentop]   the tokentop binary, whatever its quantized types do
#   MKMODEL [build/tools/mkmodel]
#   LLAMA_DIR [tools/peer/work]  holds llama.cpp/build/bin/llama-quantize and llama_logits
#                           (tools/peer/build_native.sh builds both)
#   SHAPE ["--embd 256 --heads 4 --kv-heads 2 --layers 2 --inner 768 --ctx 1024"]
#                           mkmodel options (--size llama-3.2-1b --ctx 1024 for the 1B shapes;
#                           --kv-heads is dropped for gpt2)
#   SHARPEN [6]   SCALE [1]: mkmodel --scale (above 1 the random network turns chaotic: a
#                 rounding difference in layer 1 grows into another distribution)   SEED [1]
#   TEXT [models/kjv-excerpt.txt]  NPOS [512]: at most NPOS+1 ids of TEXT are scored
#   TYPES ["Q8_0 Q4_0 Q5_0 Q4_K_M Q6_K"]   GEN [32]   THREADS [2]   TOL [1e-3]
# Prints one line per check and a table; every figure goes to WORKDIR/results.jsonl.
# Exit status: 0 when every check passed, 1 otherwise (the KL ratio is reported, not checked).
# Not run by make: it needs a llama.cpp build.
set -u
[ $# -ge 1 ] || { sed -n 3p "$0" >&2; exit 2; }
W=$1
shift
ARCHS=${*:-llama qwen2 qwen3 gpt2}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TOKENTOP=${TOKENTOP:-$ROOT/tokentop}
MKMODEL=${MKMODEL:-$ROOT/build/tools/mkmodel}
LLAMA_DIR=${LLAMA_DIR:-$HERE/work}
QUANTIZE=$LLAMA_DIR/llama.cpp/build/bin/llama-quantize
LOGITS=$LLAMA_DIR/llama_logits
SHAPE=${SHAPE:---embd 256 --heads 4 --kv-heads 2 --layers 2 --inner 768 --ctx 1024}
SCALE=${SCALE:-1} SEED=${SEED:-1} SHARPEN=${SHARPEN:-6}
TEXT=${TEXT:-$ROOT/models/kjv-excerpt.txt} NPOS=${NPOS:-512}
TYPES=${TYPES:-Q8_0 Q4_0 Q5_0 Q4_K_M Q6_K} GEN=${GEN:-32} THREADS=${THREADS:-2} TOL=${TOL:-1e-3}
PY=/usr/bin/python3
for f in "$TOKENTOP" "$MKMODEL" "$QUANTIZE" "$LOGITS"; do
    [ -x "$f" ] || { echo "gguf_compare: $f: not found or not executable" >&2; exit 2; }
done
mkdir -p "$W"
W=$(cd "$W" && pwd)
RES=$W/results.jsonl
: >"$RES"
failed=0

say() { printf '%s\n' "$*"; }
check() {   # check NAME CONDITION-COMMAND...: one PASS/FAIL line
    local name=$1
    shift
    if "$@"; then say "PASS $name"; else say "FAIL $name"; failed=1; fi
}
# greedy ids of a tokentop generate --json run, comma-separated
gen_ids() {
    $PY -c 'import json,sys
ids=[r["id"] for r in map(json.loads,sys.stdin) if "step" in r and r.get("id") is not None]
print(",".join(map(str,ids)))'
}
json_get() { $PY -c "import json,sys; print(json.load(sys.stdin)$1)"; }
ids_csv() { $PY -c 'import json,sys; print(",".join(map(str,json.load(sys.stdin))))'; }

V=
for arch in $ARCHS; do
    say "== $arch"
    d=$W/$arch
    shape=$SHAPE
    [ "$arch" = gpt2 ] && shape=$(printf '%s\n' "$SHAPE" | sed 's/--kv-heads [0-9]*//')
    # shellcheck disable=SC2086 # shape is a list of options
    if [ ! -f "$d/config.json" ]; then
        rm -rf "$d"
        if ! "$MKMODEL" "$d" --arch "$arch" $shape --tokenizer "$ROOT/tests/fixtures/gpt2" \
                --eos 50256 --scale "$SCALE" --seed "$SEED" >/dev/null ||
           ! $PY "$HERE/sharpen.py" "$d" "$SHARPEN" 2>/dev/null; then
            failed=1
            continue
        fi
    fi
    f32=$W/$arch-F32.gguf
    [ -f "$f32" ] || $PY "$HERE/hf_to_gguf.py" "$d" "$f32" 2>/dev/null || { failed=1; continue; }
    for t in $TYPES; do
        [ -f "$W/$arch-$t.gguf" ] ||
            "$QUANTIZE" "$f32" "$W/$arch-$t.gguf" "$t" >"$W/$arch-$t.quantize.log" 2>&1 ||
            { say "FAIL $arch $t: llama-quantize (see $W/$arch-$t.quantize.log)"; failed=1; }
    done

    # the ids: tokentop's tokenization of TEXT, NPOS+1 at most; llama.cpp's for comparison
    all=$("$TOKENTOP" tokenize --model "$f32" -f "$TEXT" --json) || { failed=1; continue; }
    ids=$(printf '%s' "$all" | $PY -c "import json,sys; print(','.join(map(str,json.load(sys.stdin)[:$NPOS+1])))")
    n=$(printf '%s\n' "$ids" | tr ',' '\n' | wc -l)
    ll_tok=$("$LOGITS" "$f32" --text-file "$TEXT" -t "$THREADS") || { failed=1; continue; }
    check "$arch tokenization of $(basename "$TEXT"): tokentop's ids equal llama.cpp's" \
        test "$(printf '%s' "$all" | ids_csv)" = "$(printf '%s' "$ll_tok" | json_get '["ids"]' | tr -d '[] ')"
    V=$(printf '%s' "$ll_tok" | json_get '["n_vocab"]')

    # (a) greedy ids and teacher-forced distributions, F32
    prompt=$(printf '%s' "$ids" | cut -d, -f1-16)
    tt_gen=$("$TOKENTOP" generate --model "$f32" --ids "$prompt" --greedy --ignore-eos -n "$GEN" \
             --threads "$THREADS" --json | gen_ids)
    ll_gen=$("$LOGITS" "$f32" --ids "$prompt" --gen "$GEN" -t "$THREADS" | json_get '["gen_ids"]' |
             tr -d '[] ')
    check "$arch F32 greedy: $GEN ids from tokentop equal llama.cpp's" test "$tt_gen" = "$ll_gen"
    [ "$tt_gen" = "$ll_gen" ] || say "  tokentop  $tt_gen" "  llama.cpp $ll_gen"
    hf_gen=$("$TOKENTOP" generate --model "$d" --dtype fp32 --ids "$prompt" --greedy --ignore-eos \
             -n "$GEN" --threads "$THREADS" --json | gen_ids)
    check "$arch F32 greedy: HF directory and GGUF give tokentop the same $GEN ids" \
        test "$hf_gen" = "$tt_gen"

    for t in F32 $TYPES; do
        g=$W/$arch-$t.gguf
        [ -f "$g" ] || continue
        "$TOKENTOP" score --model "$g" --ids "$ids" --threads "$THREADS" \
            --dump-logits "$W/$arch-$t.tokentop.f32" --json >"$W/$arch-$t.tokentop.json" ||
            { say "FAIL $arch $t: tokentop score"; failed=1; }
        "$LOGITS" "$g" --ids "$ids" -t "$THREADS" --logits "$W/$arch-$t.llama.f32" \
            >"$W/$arch-$t.llama.json" || { say "FAIL $arch $t: llama_logits"; failed=1; }
    done
    cmpj() { $PY "$HERE/logits_compare.py" "$V" "$1" "$2" --name "$3"; }
    r=$(cmpj "$W/$arch-F32.llama.f32" "$W/$arch-F32.tokentop.f32" "$arch F32 llama.cpp-vs-tokentop")
    printf '%s\n' "$r" >>"$RES"
    dp=$(printf '%s' "$r" | json_get '["max_dp"]')
    check "$arch F32 teacher-forced over $((n - 1)) positions: max |p - q| $dp <= $TOL" \
        $PY -c "import sys; sys.exit(not ($dp <= $TOL))"
    say "  $r"
    if [ "$arch" = gpt2 ] && ! $PY -c "import sys; sys.exit(not ($dp <= $TOL))"; then
        say "  (gpt2: llama.cpp's CPU GELU reads an fp16 table; tools/peer/gelu_probe.py $d" \
            "IDS 128 $W/$arch-F32.tokentop.f32 $W/$arch-F32.llama.f32 says which engine is exact)"
    fi
    for t in $TYPES; do
        { [ -f "$W/$arch-$t.tokentop.f32" ] && [ -f "$W/$arch-$t.llama.f32" ]; } || continue
        a=$(cmpj "$W/$arch-F32.tokentop.f32" "$W/$arch-$t.tokentop.f32" "$arch $t tokentop")
        b=$(cmpj "$W/$arch-F32.llama.f32" "$W/$arch-$t.llama.f32" "$arch $t llama.cpp")
        printf '%s\n%s\n' "$a" "$b" >>"$RES"
    done
done

$PY - "$RES" <<'EOF'
import json, sys
rows = {r["name"]: r for r in map(json.loads, open(sys.argv[1]))}
print(f"\n{'arch':6} {'type':7} {'positions':>9} {'KL tokentop':>12} {'KL llama.cpp':>12} "
      f"{'ratio':>6} {'top1 tt':>8} {'top1 ll':>8} {'p(top1)':>8}")
for name, r in rows.items():
    arch, t, eng = name.split(" ", 2)
    if eng != "tokentop":
        continue
    ll = rows.get(f"{arch} {t} llama.cpp")
    if not ll:
        continue
    ratio = r["mean_kl"] / ll["mean_kl"] if ll["mean_kl"] > 0 else float("nan")
    print(f"{arch:6} {t:7} {r['positions']:9d} {r['mean_kl']:12.3e} {ll['mean_kl']:12.3e} "
          f"{ratio:6.3f} {r['top1_agree']:8.3f} {ll['top1_agree']:8.3f} {r['ref_top1_p']:8.3f}")
EOF
exit $failed
