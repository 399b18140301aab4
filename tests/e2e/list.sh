#!/usr/bin/env bash
# End-to-end checks of `tokentop list` and `--list-models` over a fake Ollama store
# ($OLLAMA_MODELS) holding the committed GGUF fixtures, one broken manifest and one blob whose size
# differs from its manifest, and of gguf_info over the fixtures.
set -u
source "$(dirname "$0")/common.bash"

S=$tmp/ollama
fx=tests/fixtures/gguf
add() {   # NAME TAG FILE HEXCHAR [SIZE]
    local hex size
    hex=$(printf "$4%.0s" $(seq 64))
    mkdir -p "$S/blobs" "$S/manifests/registry.ollama.ai/library/$1"
    cp "$3" "$S/blobs/sha256-$hex"
    size=${5:-$(stat -c %s "$3")}
    printf '{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%s}]}\n' \
        "$hex" "$size" > "$S/manifests/registry.ollama.ai/library/$1/$2"
}
add tiny-llama q8 "$fx/tiny-llama-q8_0.gguf" a
add tiny-qwen2 latest "$fx/tiny-qwen2-f16.gguf" b
add short latest "$fx/tiny-qwen3-q8_0.gguf" c 99
mkdir -p "$S/manifests/registry.ollama.ai/library/junk"
echo 'not json' > "$S/manifests/registry.ollama.ai/library/junk/latest"

out=$(OLLAMA_MODELS=$S HOME=$tmp/home "$BIN" list)
rc=$?
check "list exits 0" test "$rc" -eq 0
check "list has a header" grep -q '^NAME  *SOURCE  *ARCH  *PARAMS  *QUANT  *SIZE$' <<<"$out"
check "the embedded models are listed" grep -q 'models/kjv-target  *embedded  *gpt2' <<<"$out"
check "an Ollama llama model with its figures" \
    grep -Eq '^tiny-llama:q8 +ollama +llama +39K +Q8_0 +52 KB$' <<<"$out"
check "an Ollama qwen2 model with its figures" \
    grep -Eq '^tiny-qwen2:latest +ollama +qwen2 +29K +F16 +65 KB$' <<<"$out"
check "a blob of the wrong size is named" \
    grep -q '^short:latest .*cannot be read: short:latest: the model layer.s blob .* is 38176 bytes, the manifest says 99$' <<<"$out"
check "a malformed manifest is named" \
    grep -q '^junk:latest .*cannot be read: .*junk/latest: not a JSON object$' <<<"$out"
out2=$(OLLAMA_MODELS=$S HOME=$tmp/home "$BIN" --list-models)
check "--list-models prints the same table" test "$out" == "$out2"
"$BIN" list extra >/dev/null 2>"$tmp/err"
check "list refuses an argument" test $? -eq 2
check "and says which" grep -q "unexpected argument 'extra'" "$tmp/err"
check "list --help says where it looks" bash -c "'$BIN' list --help | grep -q OLLAMA_MODELS"

GI=$BUILD/tools/gguf_info
check "gguf_info reads and checks every fixture" bash -c "'$GI' --quiet $fx/*.gguf >/dev/null"
printf 'GGUF\003\000\000\000' > "$tmp/short.gguf"
"$GI" "$tmp/short.gguf" 2>"$tmp/gierr" >/dev/null
check "gguf_info refuses a truncated header, naming the file" \
    grep -q "short.gguf: header: the file is 8 bytes, too short for a GGUF header" "$tmp/gierr"
finish
