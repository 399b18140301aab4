#!/usr/bin/env bash
# mkllama_golden.sh: regenerates the Llama-family fixtures (tests/fixtures/llama/<model>/, small
# random models in the exact Hugging Face layout, written by tools/ref/mkllama.py) and their float64
# goldens (tests/golden/<name>.txt, written by tools/ref/llama_ref.py). Run from anywhere:
#   tools/ref/mkllama_golden.sh
# Unlike the GPT-2 goldens the models are committed (the C side has no writer for the HF layout to
# regenerate them from); each golden records the FNV-1a 64 of the model's (first) safetensors file,
# so a test refuses a fixture that drifted from its golden. Needs /usr/bin/python3 with numpy
# (Debian's python3-numpy).
source "$(dirname "$0")/common.sh"
FIX=tests/fixtures/llama

# ids DIR N: N prompt ids spread over the tokenizer's byte and merge tokens (no added tokens and
# no padding rows, as a text prompt would be): the k-th is the ((k*67+11) mod n)-th such id, which
# repeats only after n ids (67 is a prime that divides none of the fixtures' n = 296).
ids() {
    "$PY" - "$1/tokenizer.json" "$2" <<'EOF'
import json, math, sys
tok = json.load(open(sys.argv[1], encoding="utf-8"))
added = {t["id"] for t in tok["added_tokens"]}
ids = sorted(set(tok["model"]["vocab"].values()) - added)
assert math.gcd(67, len(ids)) == 1, len(ids)
print(",".join(str(ids[(k * 67 + 11) % len(ids)]) for k in range(int(sys.argv[2]))))
EOF
}

# model NAME -- MKLLAMA_ARGS...: writes the fixture NAME
model() {
    local name=$1; shift 2
    rm -rf "${FIX:?}/$name"
    "$PY" tools/ref/mkllama.py "$FIX/$name" "$@"
}

# golden NAME MODEL HELD_DTYPE [N ROWS]: the golden NAME of fixture MODEL held in HELD_DTYPE: the
# logits of ROWS (default 0, 9 and the last) of N ids (default 24), the greedy 16 tokens after
# them, the top 5 of each row
golden() {
    local name=$1 model=$2 dtype=$3 n=${4:-24} rows=${5:-0,9,-1}
    "$PY" tools/ref/llama_ref.py "$FIX/$model" --name "$name" --fixture "$FIX/$model" \
        --dtype "$dtype" --rows "$rows" --ids "$(ids "$FIX/$model" "$n")" --greedy 16 --top 5 \
        --out "$OUT/$name.txt"
    echo "wrote $OUT/$name.txt"
}

# The seeds were picked (the first from 1 up) for a greedy continuation of at least 8 distinct ids,
# none of them an added token or a padding row, whose top-1/top-2 logit gap is at
# least 0.1 at every step in every golden of that model, so that an engine's greedy ids can be
# compared exactly.
model llama-gqa          -- --type llama --heads 4 --kv-heads 2 --inter 96 --theta 10000 \
                            --file-dtype f32 --eos-list --seed 2
model llama-untied-rope3 -- --type llama --heads 4 --kv-heads 2 --inter 128 --untied \
                            --theta 500000 --rope-llama3 8,1,4,64 --file-dtype f16 --seed 19
model llama-mha-sharded  -- --type llama --heads 4 --kv-heads 4 --inter 128 --attention-bias \
                            --shards 2 --file-dtype bf16 --seed 5
model mistral            -- --type mistral --heads 4 --kv-heads 2 --inter 128 --untied \
                            --sliding-window 4096 --file-dtype bf16 --seed 1
model qwen2              -- --type qwen2 --heads 4 --kv-heads 2 --inter 96 --theta 1000000 \
                            --vocab-pad 320 --file-dtype f32 --seed 22
model qwen3              -- --type qwen3 --heads 4 --kv-heads 2 --head-dim 32 --inter 128 \
                            --theta 1000000 --vocab-pad 320 --merges-as-pairs --file-dtype bf16 \
                            --seed 4

golden llama-gqa                 llama-gqa          fp32
golden llama-gqa-as-bf16         llama-gqa          bf16
golden llama-untied-rope3        llama-untied-rope3 fp32
golden llama-untied-rope3-as-bf16 llama-untied-rope3 bf16
golden llama-mha-sharded         llama-mha-sharded  fp32
golden mistral                   mistral            fp32
golden qwen2                     qwen2              fp32
golden qwen2-as-fp16             qwen2              fp16
golden qwen3                     qwen3              fp32
golden qwen3-as-fp16             qwen3              fp16
# Long prompts: their greedy runs reach position 122 (107 ids) and 124 (109 ids) of the 128 the
# context holds, where llama3's scaled RoPE bands and Qwen's theta 1e6 differ most from short
# positions (each the longest prompt from 112 down whose greedy run meets the conditions above)
golden llama-untied-rope3-long   llama-untied-rope3 fp32 107 0,63,-1
golden qwen3-long                qwen3              fp32 109 0,63,-1
