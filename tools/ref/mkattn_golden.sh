#!/usr/bin/env bash
# mkattn_golden.sh: regenerates tests/golden/attn-*.txt, the float64 attention probabilities
# tests/check_attention.c compares the engines' attention capture with (core/engine/attention.h):
# for each requested row (query position) of a prompt, every layer's and head's softmax over the
# keys 0 .. row. GPT-2: a random model from build/tools/mkmodel (as mkgolden.sh; run after `make
# tools`), reference tools/ref/gpt2_ref.py; the Llama family: the committed fixtures of
# tests/fixtures/llama (mkllama_golden.sh), reference tools/ref/llama_ref.py. Run:
#   tools/ref/mkattn_golden.sh
source "$(dirname "$0")/common.sh"

# ids N V: as mkgolden.sh's (the test reads them from the golden)
ids() { local n=$1 v=$2 s="" i; for ((i = 0; i < n; i++)); do s+="${s:+,}$(( (i * 37 + 11) % v ))"; done; echo "$s"; }

ROWS=0,7,-2,-1
N=20

# gpt2 NAME -- MKMODEL_ARGS...
gpt2() {
    local name=$1; shift 2
    local dir="$tmp/$name"
    "$MKMODEL" "$dir" "$@" >/dev/null
    local V
    V=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$dir/config.json")
    "$PY" tools/ref/gpt2_ref.py "$dir" --name "$name" --attention --rows "$ROWS" \
        --ids "$(ids "$N" "$V")" --out "$OUT/attn-$name.txt"
    echo "wrote $OUT/attn-$name.txt"
}

# llama NAME: the fixture tests/fixtures/llama/NAME held in fp32 (ids below 300: every fixture's
# vocabulary holds them)
llama() {
    "$PY" tools/ref/llama_ref.py "tests/fixtures/llama/$1" --name "$1" \
        --fixture "tests/fixtures/llama/$1" --attention --rows "$ROWS" --ids "$(ids "$N" 300)" \
        --out "$OUT/attn-$1.txt"
    echo "wrote $OUT/attn-$1.txt"
}

gpt2 gpt2-tiny -- --seed 1
gpt2 gpt2-odd  -- --vocab 301 --ctx 40 --embd 36 --heads 3 --layers 3 --inner 99 --seed 5
llama llama-gqa
llama qwen2
llama qwen3
llama mistral
