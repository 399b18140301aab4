#!/usr/bin/env bash
# mkllama_golden.sh: regenerates the Llama-family fixtures (tests/fixtures/llama/<model>/, small
# random models in the exact Hugging Face layout, written by tools/ref/mkllama.py) and their float64
# goldens (tests/golden/<name>.txt, written by tools/ref/llama_ref.py), and each fixture's
# tokenizer-cases.jsonl (tools/ref/mktokcases.mjs). Run from anywhere:
#   tools/ref/mkllama_golden.sh
# Unlike the GPT-2 goldens the models are committed (the C side has no writer for the HF layout to
# regenerate them from); each golden records the FNV-1a 64 of the model's (first) safetensors file,
# so a test refuses a fixture that drifted from its golden. Needs /usr/bin/python3 with numpy
# (Debian's python3-numpy), and node and npm for the tokenizer cases.
source "$(dirname "$0")/common.sh"
FIX=tests/fixtures/llama

# ids DIR N: N prompt ids spread over the tokenizer's byte and merge tokens (no added tokens and
# no padding rows, as a text prompt would be): the k-th is the ((k*67+11) mod n)-th such id, which
# repeats only after n ids (the assert keeps 67 coprime to n, 302 in every fixture).
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

# model NAME -- MKLLAMA_ARGS...: writes the fixture NAME (keeping its tokenizer-cases.jsonl, which
# tokcases rewrites where it can)
model() {
    local name=$1; shift 2
    rm -f "${FIX:?}/$name"/*.json "$FIX/$name"/*.safetensors
    "$PY" tools/ref/mkllama.py "$FIX/$name" "$@"
}

# tokcases NAME: FIX/NAME/tokenizer-cases.jsonl, the ids an independent encoder
# (@lenml/tokenizers 3.7.2 from npm, installed into build/ref-npm) gives for a set of texts; skipped
# with a warning where node or npm is missing
NPM_DIR=build/ref-npm
tokcases() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "warning: node or npm missing: $FIX/$1/tokenizer-cases.jsonl left as it was" >&2
        return
    fi
    [ -d "$NPM_DIR/node_modules/@lenml/tokenizers" ] ||
        npm install --silent --prefix "$NPM_DIR" @lenml/tokenizers@3.7.2 >/dev/null
    LENML_DIR=$NPM_DIR node tools/ref/mktokcases.mjs "$FIX/$1" "$FIX/$1/tokenizer-cases.jsonl"
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
# none of them an added token or a padding row, whose top-1/top-2 logit gap is at least 0.1 at
# every step in every golden of that model, so that an engine's greedy ids can be compared exactly.
model llama-gqa          -- --type llama --heads 4 --kv-heads 2 --inter 96 --theta 10000 \
                            --file-dtype f32 --eos-list --seed 11
model llama-untied-rope3 -- --type llama --heads 4 --kv-heads 2 --inter 128 --untied \
                            --theta 500000 --rope-llama3 8,1,4,64 --file-dtype f16 --seed 1
model llama-mha-sharded  -- --type llama --heads 4 --kv-heads 4 --inter 128 --attention-bias \
                            --shards 2 --file-dtype bf16 --seed 11
model mistral            -- --type mistral --heads 4 --kv-heads 2 --inter 128 --untied \
                            --sliding-window 4096 --file-dtype bf16 --seed 8
model qwen2              -- --type qwen2 --heads 4 --kv-heads 2 --inter 96 --theta 1000000 \
                            --vocab-pad 320 --file-dtype f32 --seed 30
model qwen3              -- --type qwen3 --heads 4 --kv-heads 2 --head-dim 32 --inter 128 \
                            --theta 1000000 --vocab-pad 320 --merges-as-pairs --file-dtype bf16 \
                            --seed 4

for m in llama-gqa llama-untied-rope3 llama-mha-sharded mistral qwen2 qwen3; do tokcases "$m"; done

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
# Long prompts, each the longest from 112 down whose greedy run meets the conditions above: the
# greedy tokens reach position 119 (llama3's scaled RoPE bands), 118 (Qwen3's theta 1e6 with q/k
# norm) and 127, the last the context (max_position_embeddings 128) holds
golden llama-untied-rope3-long   llama-untied-rope3 fp32 104 0,63,-1
golden qwen3-long                qwen3              fp32 103 0,63,-1
golden mistral-long              mistral            fp32 112 0,63,-1
