#!/usr/bin/env bash
# End-to-end checks of the Llama family through the command line: the committed fixtures
# (tests/fixtures/llama, written by tools/ref/mkllama.py) give the float64 reference's greedy
# tokens through generate --ids; speculative decoding with a draft of the same vocabulary equals
# plain greedy, one of another vocabulary is refused naming both; bench runs on a family model;
# and bad input (an unknown model_type, --ids out of the vocabulary, a missing tensor, a wrong
# shape) gets one message naming the file, field and value.
set -u
source "$(dirname "$0")/common.bash"
F=tests/fixtures/llama

# The reference's greedy continuation after the golden's ids, from generate --ids --json.
ref_greedy() { sed -n 's/^greedy [0-9]* //p' "tests/golden/$1.txt"; }
golden_ids() { sed -n 's/^ids [0-9]* //p' "tests/golden/$1.txt" | tr ' ' ','; }
our_greedy() {
    "$BIN" generate --model "$F/$2" --threads 1 --ids "$(golden_ids "$1")" --greedy -n 16 \
        --ignore-eos --json 2>/dev/null | sed -n 's/^{"step":[0-9]*,"id":\([0-9]*\),.*/\1/p' |
        tr '\n' ' ' | sed 's/ $//'
}
for g in llama-gqa:llama-gqa llama-untied-rope3:llama-untied-rope3 mistral:mistral qwen2:qwen2 \
         qwen3:qwen3 llama-mha-sharded:llama-mha-sharded; do
    name=${g%%:*} dir=${g#*:}
    check "$name: generate --ids --greedy gives the float64 reference's 16 tokens" \
        test "$(our_greedy "$name" "$dir")" == "$(ref_greedy "$name")"
done

# A raw prompt starts with the BOS the tokenizer adds (llama-gqa: a TemplateProcessing BOS;
# mistral: add_bos_token), the same ids tokenize --json prints.
for dir in llama-gqa mistral; do
    n_tok=$("$BIN" tokenize --model "$F/$dir" --json -p "Hello world" | tr ',' '\n' | grep -c '[0-9]')
    n_gen=$("$BIN" generate --model "$F/$dir" --threads 1 -p "Hello world" -n 1 --json 2>/dev/null |
            tail -1 | sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p')
    first=$("$BIN" tokenize --model "$F/$dir" --json -p "Hello world" | sed 's/^\[\([0-9]*\),.*/\1/')
    bos=$(sed -n 's/.*"bos_token_id": \([0-9]*\).*/\1/p' "$F/$dir/config.json")
    check "$dir: a prompt's first turn starts with the tokenizer's BOS ($bos), as tokenize shows" \
        test "$n_gen" == "$n_tok" -a "$first" == "$bos"
done

# Speculative decoding over the family: the model as its own draft gives plain greedy's text.
plain=$("$BIN" generate --model "$F/qwen2" --threads 1 -p "Hello world" --greedy -n 30 --ignore-eos -q)
spec=$("$BIN" generate --model "$F/qwen2" --draft "$F/qwen2" --gamma 4 --threads 1 \
       -p "Hello world" --greedy -n 30 --ignore-eos -q)
check "qwen2 drafting for itself gives plain greedy's text" test "$plain" == "$spec"
"$BIN" generate --model "$F/qwen3" --draft "$F/llama-gqa" -p hi -n 2 2>"$tmp/mismatch" >/dev/null
check "a draft with another vocabulary is refused naming both models" \
    grep -q "qwen3.*llama-gqa\|llama-gqa.*qwen3" "$tmp/mismatch"

# bench names the architecture and the KV cache per position.
"$BIN" bench --model "$F/llama-gqa" --prompt-tokens 16 --gen-tokens 4 --json > "$tmp/bench.json" 2>/dev/null
check "bench runs a llama model and names its architecture" grep -q '"arch":"llama"' "$tmp/bench.json"
check "bench reports the KV cache's bytes per position (2 x 2 layers x 2 KV heads x 16 x 4)" \
    grep -q '"kv_bytes_per_position":512' "$tmp/bench.json"

# Bad input: one message naming the file, field and value; nothing runs.
mkdir -p "$tmp/bert" && cp -r "$F/llama-gqa/." "$tmp/bert/"
sed -i 's/"model_type": "llama"/"model_type": "bert"/' "$tmp/bert/config.json"
"$BIN" generate --model "$tmp/bert" -p hi -n 2 2>"$tmp/err" >/dev/null
check "an unknown model_type is refused by name with the supported list" \
    grep -q "config.json: model_type: 'bert' is not an architecture tokentop runs (it runs gpt2, llama, mistral, qwen2, qwen3)" "$tmp/err"
"$BIN" generate --model "$F/qwen3" --ids 3,320 -n 2 2>"$tmp/err" >/dev/null
check "--ids outside the vocabulary is refused naming the id" \
    grep -q -- "--ids: id 2: 320 is outside the vocabulary \[0, 320)" "$tmp/err"
"$BIN" generate --model "$F/qwen3" --ids 3,x -n 2 2>"$tmp/err" >/dev/null
check "--ids that are not integers are refused" grep -q -- "--ids: id 2: 'x' is not an integer" "$tmp/err"
mkdir -p "$tmp/rope" && cp -r "$F/llama-gqa/." "$tmp/rope/"
sed -i 's/"rope_scaling": null/"rope_scaling": {"rope_type": "yarn", "factor": 4.0}/' "$tmp/rope/config.json"
"$BIN" generate --model "$tmp/rope" -p hi -n 2 2>"$tmp/err" >/dev/null
check "an unsupported rope scaling is refused by name" grep -q "rope_scaling: type 'yarn' is not supported" "$tmp/err"
mkdir -p "$tmp/shape" && cp -r "$F/qwen3/." "$tmp/shape/"
sed -i 's/"head_dim": 32/"head_dim": 16/' "$tmp/shape/config.json"
"$BIN" generate --model "$tmp/shape" -p hi -n 2 2>"$tmp/err" >/dev/null
check "a tensor of the wrong shape is refused naming the tensor and both shapes" \
    grep -q "model.safetensors: tensor model.layers.0.self_attn.q_proj.weight: expected \[64,64\], got \[128,64\]" "$tmp/err"
finish
