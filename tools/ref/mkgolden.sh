#!/usr/bin/env bash
# mkgolden.sh: regenerates tests/golden/*.txt, the float64 reference logits tests/check_forward.c
# compares the CPU backend with. Run from the repository root after `make tools`:
#   tools/ref/mkgolden.sh
# Each entry writes a random model with build/tools/mkmodel (deterministic from its options, so
# the test regenerates the same bytes: the golden records model.safetensors' FNV-1a 64 and the test
# refuses a model that drifted), then runs tools/ref/gpt2_ref.py on it. The options here must match
# the table in tests/check_forward.c (the checksum catches a mismatch). Only the small text outputs
# are committed; the models are thrown away.
source "$(dirname "$0")/common.sh"

# ids N V: N token ids spread over the vocabulary, the same formula the test does not need (it
# reads them from the golden file).
ids() { local n=$1 v=$2 s="" i; for ((i = 0; i < n; i++)); do s+="${s:+,}$(( (i * 37 + 11) % v ))"; done; echo "$s"; }

# golden NAME HELD_DTYPE ROWS NIDS EDIT -- MKMODEL_ARGS...
golden() {
    local name=$1 dtype=$2 rows=$3 nids=$4 edit=$5; shift 6
    local dir="$tmp/$name"
    "$MKMODEL" "$dir" "$@" >/dev/null
    if [ "$edit" = erf ]; then
        sed -i 's/"activation_function": "gelu_new"/"activation_function": "gelu"/' "$dir/config.json"
        grep -q '"activation_function": "gelu"' "$dir/config.json"
    fi
    local V
    V=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$dir/config.json")
    "$PY" tools/ref/gpt2_ref.py "$dir" --name "$name" --dtype "$dtype" --rows "$rows" \
        --ids "$(ids "$nids" "$V")" --out "$OUT/$name.txt"
    echo "wrote $OUT/$name.txt"
}

golden tiny-f32           fp32 0,9,-1 24 -   --
golden tiny-f32-as-bf16   bf16 0,9,-1 24 -   --
golden tiny-f32-as-fp16   fp16 0,9,-1 24 -   --
golden tiny-f16           fp16 0,9,-1 24 -   -- --dtype fp16
golden tiny-bf16          bf16 0,9,-1 24 -   -- --dtype bf16
golden tiny-bf16-as-fp32  fp32 0,9,-1 24 -   -- --dtype bf16
golden noprefix-masks     fp32 0,9,-1 24 -   -- --no-prefix --mask-buffers --seed 7
golden untied             fp32 0,9,-1 24 -   -- --untied --seed 2
golden untied-f16-as-bf16 bf16 0,9,-1 24 -   -- --untied --seed 2 --dtype fp16
golden erf                fp32 0,9,-1 24 erf -- --seed 3
golden odd                fp32 0,13,-1 31 -  -- --vocab 301 --ctx 40 --embd 36 --heads 3 --layers 3 --inner 99 --seed 5
golden odd-bf16           bf16 0,13,-1 31 -  -- --vocab 301 --ctx 40 --embd 36 --heads 3 --layers 3 --inner 99 --seed 5 --dtype bf16
golden long               fp32 0,255,256,-1 300 - -- --vocab 300 --ctx 320 --embd 32 --heads 2 --layers 2 --seed 9
