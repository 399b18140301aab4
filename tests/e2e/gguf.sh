#!/usr/bin/env bash
# End-to-end checks of GGUF models: `generate` on each committed GGUF fixture; the tiny llama as a
# Hugging Face directory and as F32, F16 and Q8_0 GGUF files gives the same greedy text; a GGUF
# without its suffix loads by its magic; a name pulled by Ollama (a fake $OLLAMA_MODELS store)
# loads its blob with the params layer's defaults and stop strings; a truncated file, a missing name and a blob of
# the wrong size are refused by name and nothing is generated.
set -u
source "$(dirname "$0")/common.bash"

fx=tests/fixtures/gguf
G=(generate --threads 2 --backend cpu -p "the cat" -n 12 --temp 0 --chat-template raw)

for f in tiny-llama-f32.gguf tiny-llama-f16.gguf tiny-llama-q8_0.gguf tiny-qwen2-f16.gguf \
         tiny-qwen3-q8_0.gguf; do
    "$BIN" "${G[@]}" --model "$fx/$f" >"$tmp/$f.out" 2>"$tmp/$f.err"
    check "generate on $f exits 0" test $? -eq 0
    check "generate on $f reports its 12 tokens" grep -q '^\[12 tokens' "$tmp/$f.err"
    check "generate on $f prints text" test -s "$tmp/$f.out"
done
"$BIN" "${G[@]}" --model "$fx/tiny-llama" >"$tmp/hf.out" 2>/dev/null
text() { cat "$1"; }
for f in tiny-llama-f32.gguf tiny-llama-f16.gguf tiny-llama-q8_0.gguf; do
    check "$f: the same greedy text as the HF directory" diff <(text "$tmp/hf.out") <(text "$tmp/$f.out")
done

# bench without --dtype measures a GGUF as it is held (as generate runs it: an F16 file's rows
# as stored), not as fp32
for f in tiny-llama-f16.gguf:gguf tiny-qwen3-q8_0.gguf:q8 tiny-llama-f32.gguf:fp32; do
    "$BIN" bench --model "$fx/${f%%:*}" --threads 1 --prompt-tokens 8 --gen-tokens 4 --json \
        >"$tmp/bench.json" 2>/dev/null
    check "bench on ${f%%:*} without --dtype holds its weights in ${f##*:}" \
        grep -q "\"dtype\":\"${f##*:}\"" "$tmp/bench.json"
done
"$BIN" bench --model "$fx/tiny-llama-f16.gguf" --dtype fp32 --threads 1 --prompt-tokens 8 \
    --gen-tokens 4 --json >"$tmp/bench32.json" 2>/dev/null
check "bench --dtype fp32 on an F16 GGUF converts it" grep -q '"dtype":"fp32"' "$tmp/bench32.json"

cp "$fx/tiny-qwen2-f16.gguf" "$tmp/noext"
"$BIN" "${G[@]}" --model "$tmp/noext" >"$tmp/noext.out" 2>/dev/null
check "a GGUF without the .gguf suffix loads by its magic" \
    diff <(text "$tmp/noext.out") <(text "$tmp/tiny-qwen2-f16.gguf.out")

head -c $(($(stat -c %s "$fx/tiny-llama-f16.gguf") - 1000)) "$fx/tiny-llama-f16.gguf" > "$tmp/cut.gguf"
"$BIN" "${G[@]}" --model "$tmp/cut.gguf" >"$tmp/cut.out" 2>"$tmp/cut.err"
check "a truncated GGUF fails" test $? -ne 0
check "a truncated GGUF is named" grep -q 'cut.gguf: .*past the end' "$tmp/cut.err"
check "a truncated GGUF generates nothing" test ! -s "$tmp/cut.out"

# A fake Ollama store: a model blob with a params layer, and a blob of the wrong size.
S=$tmp/ollama
blob() {   # HEXCHAR FILE -> prints the digest
    local hex
    hex=$(printf "$1%.0s" $(seq 64))
    mkdir -p "$S/blobs"
    cp "$2" "$S/blobs/sha256-$hex"
    echo "$hex"
}
mkdir -p "$S/manifests/registry.ollama.ai/library/tiny-llama" "$S/manifests/registry.ollama.ai/library/short"
printf '{"num_predict": 8, "temperature": 0, "stop": ["hant"]}' > "$tmp/params"
m=$(blob a "$fx/tiny-llama-q8_0.gguf"); p=$(blob b "$tmp/params")
printf '{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%s},{"mediaType":"application/vnd.ollama.image.params","digest":"sha256:%s","size":%s}]}\n' \
    "$m" "$(stat -c %s "$fx/tiny-llama-q8_0.gguf")" "$p" "$(stat -c %s "$tmp/params")" \
    > "$S/manifests/registry.ollama.ai/library/tiny-llama/q8"
s=$(blob c "$fx/tiny-qwen3-q8_0.gguf")
printf '{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":99}]}\n' \
    "$s" > "$S/manifests/registry.ollama.ai/library/short/latest"
O=(generate --threads 2 --backend cpu -p "the cat" --chat-template raw)

OLLAMA_MODELS=$S HOME=$tmp/home "$BIN" "${O[@]}" --model tiny-llama:q8 >"$tmp/ol.out" 2>"$tmp/ol.err"
check "an Ollama name loads its blob" test $? -eq 0
check "the params layer's stop string ends the text" grep -q 'stop: stop_string' "$tmp/ol.err"
check "the params layer's temperature 0 gives the greedy text, up to the stop string" \
    test "$(text "$tmp/tiny-llama-q8_0.gguf.out")" != "$(text "$tmp/ol.out")" -a \
         "$(text "$tmp/ol.out")hant" == "$(text "$tmp/tiny-llama-q8_0.gguf.out" | head -c "$(( $(printf %s "$(text "$tmp/ol.out")" | wc -c) + 4 ))")"
OLLAMA_MODELS=$S HOME=$tmp/home "$BIN" "${O[@]}" --model tiny-llama:q8 --stop zzzz >"$tmp/st.out" 2>"$tmp/st.err"
check "--stop replaces them; the params layer's num_predict applies" grep -q '^\[8 tokens, stop: max_tokens' "$tmp/st.err"
OLLAMA_MODELS=$S HOME=$tmp/home "$BIN" "${O[@]}" --model nosuch:7b >"$tmp/miss.out" 2>"$tmp/miss.err"
check "a missing name fails" test $? -ne 0
check "a missing name says where it looked" \
    grep -q "nosuch:7b: not in the Ollama store (looked for $S/manifests/registry.ollama.ai/library/nosuch/7b" "$tmp/miss.err"
OLLAMA_MODELS=$S HOME=$tmp/home "$BIN" "${O[@]}" --model short >"$tmp/short.out" 2>"$tmp/short.err"
check "a blob of the wrong size fails" test $? -ne 0
check "a blob of the wrong size is named" grep -q 'is 38176 bytes, the manifest says 99' "$tmp/short.err"
check "nothing is generated from it" test ! -s "$tmp/short.out"
finish
