#!/usr/bin/env bash
# mklens_golden.sh: regenerates tests/golden/lens-*.txt, the float64 logit lens (each layer's
# residual stream at the last position through the final norm and the head) that
# tests/check_lens.c compares tokentop's lens with. Run from anywhere after `make tools`:
#   tools/ref/mklens_golden.sh
# GPT-2: random models written by build/tools/mkmodel with the options of tools/ref/mkgolden.sh
# (the test writes the same bytes and checks the checksum), lensed by gpt2_ref.py --lens. The
# Llama family: the committed fixtures of tools/ref/mkllama_golden.sh, lensed by
# llama_ref.py --lens. The prompts are mkgolden.sh's and mkllama_golden.sh's first 24 ids.
source "$(dirname "$0")/common.sh"
FIX=tests/fixtures/llama

# gpt2 NAME HELD_DTYPE -- MKMODEL_ARGS...: 24 ids (i * 37 + 11) mod V, as mkgolden.sh's ids
gpt2() {
    local name=$1 dtype=$2; shift 3
    local dir="$tmp/$name" V ids="" i
    "$MKMODEL" "$dir" "$@" >/dev/null
    V=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$dir/config.json")
    for ((i = 0; i < 24; i++)); do ids+="${ids:+,}$(( (i * 37 + 11) % V ))"; done
    "$PY" tools/ref/gpt2_ref.py "$dir" --name "lens-$name" --dtype "$dtype" --ids "$ids" --lens \
        --out "$OUT/lens-$name.txt"
    echo "wrote $OUT/lens-$name.txt"
}

# llama NAME MODEL HELD_DTYPE: 24 ids, the k-th the ((k*67+11) mod n)-th byte or merge token, as
# mkllama_golden.sh's ids
llama() {
    local name=$1 model=$2 dtype=$3 ids
    ids=$("$PY" - "$FIX/$model/tokenizer.json" <<'PYEOF'
import json, sys
tok = json.load(open(sys.argv[1], encoding="utf-8"))
added = {t["id"] for t in tok["added_tokens"]}
ids = sorted(set(tok["model"]["vocab"].values()) - added)
print(",".join(str(ids[(k * 67 + 11) % len(ids)]) for k in range(24)))
PYEOF
)
    "$PY" tools/ref/llama_ref.py "$FIX/$model" --name "lens-$name" --fixture "$FIX/$model" \
        --dtype "$dtype" --ids "$ids" --lens --out "$OUT/lens-$name.txt"
    echo "wrote $OUT/lens-$name.txt"
}

gpt2  tiny-f32          fp32 --
gpt2  tiny-f32-as-fp16  fp16 --
gpt2  untied            fp32 -- --untied --seed 2
gpt2  odd               fp32 -- --vocab 301 --ctx 40 --embd 36 --heads 3 --layers 3 --inner 99 --seed 5
llama llama-gqa          llama-gqa          fp32
llama llama-untied-rope3 llama-untied-rope3 fp32
llama llama-mha-sharded  llama-mha-sharded  fp32
llama mistral            mistral            fp32
llama qwen2              qwen2              fp32
llama qwen3              qwen3              fp32
llama qwen3-as-fp16      qwen3              fp16
