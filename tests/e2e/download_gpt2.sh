#!/usr/bin/env bash
# e2e: `make gpt2` / tools/download_gpt2.sh against a local file:// mirror of the hub (no network):
# verified download, skip when complete, corrupted and truncated files refused, resume of a
# partial file, missing files, unpublished checksums, offline and usage errors.
set -u
source "$(dirname "$0")/common.bash"

script=tools/download_gpt2.sh

command -v curl >/dev/null 2>&1 || { echo "FAIL: curl is not installed (tools/deps.sh installs it)"; exit 1; }

# ---------------------------------------------------------------------------------------------
# A mirror laid out like the hub: <repo>/resolve/main/<file>, with HF's headers in sidecars.

git_blob_sha1() { { printf 'blob %d\0' "$(stat -c %s "$1")"; cat "$1"; } | sha1sum | awk '{ print $1 }'; }

# make_repo REPO TAG: fills the mirror for REPO with small files whose content depends on TAG.
make_repo() {
    local d="$tmp/mirror/$1/resolve/main" f
    mkdir -p "$d"
    printf '{"model_type": "gpt2", "tag": "%s"}\n' "$2" > "$d/config.json"
    printf '{"bos_token_id": 50256, "eos_token_id": 50256}\n' > "$d/generation_config.json"
    printf '{"!": 0, "tag-%s": 1}' "$2" > "$d/vocab.json"
    printf '#version: 0.2\n\xc4\xa0 t\n' > "$d/merges.txt"
    # 300 KB of weights-like bytes, so that resuming has something to resume.
    head -c 300000 /dev/zero | tr '\0' 'w' > "$d/model.safetensors"
    printf '%s' "$2" >> "$d/model.safetensors"
    for f in config.json generation_config.json vocab.json merges.txt; do
        printf 'HTTP/1.1 200 OK\r\nETag: "%s"\r\nContent-Length: %s\r\n' \
            "$(git_blob_sha1 "$d/$f")" "$(stat -c %s "$d/$f")" > "$d/$f.headers"
    done
    printf 'HTTP/1.1 302 Found\r\nX-Linked-Size: %s\r\nX-Linked-ETag: "%s"\r\nETag: W/"%s"\r\n' \
        "$(stat -c %s "$d/model.safetensors")" "$(sha256sum "$d/model.safetensors" | awk '{print $1}')" \
        "$(git_blob_sha1 "$d/$f")" > "$d/model.safetensors.headers"
}

make_repo openai-community/gpt2 small
make_repo openai-community/gpt2-medium medium
make_repo distilbert/distilgpt2 distil
mirror="file://$tmp/mirror"
src="$tmp/mirror/openai-community/gpt2/resolve/main"

run_dl() { HF_ENDPOINT="$mirror" bash "$script" "$@" > "$tmp/out" 2>&1; }

# 1. A verified download of every file, and the hint to run it.
if run_dl gpt2 "$tmp/models/gpt2"; then
    ok=1
    for f in config.json generation_config.json vocab.json merges.txt model.safetensors; do
        cmp -s "$src/$f" "$tmp/models/gpt2/$f" || { ok=0; fail "gpt2: $f differs from the mirror"; }
    done
    [ $ok -eq 1 ] && ok "gpt2: five files downloaded byte for byte"
    grep -q "model.safetensors: ok (300005 bytes, sha256 verified)" "$tmp/out" \
        && ok "gpt2: weights verified by sha256" || fail "gpt2: no sha256 verification reported: $(cat "$tmp/out")"
    grep -q "vocab.json: ok (.*git blob sha1 verified)" "$tmp/out" \
        && ok "gpt2: vocab.json verified by its git blob id" || fail "gpt2: vocab.json not verified: $(cat "$tmp/out")"
    grep -q -- "--model $tmp/models/gpt2" "$tmp/out" && ok "gpt2: prints how to run it" \
        || fail "gpt2: no run hint"
    grep -q -- "--draft" "$tmp/out" && fail "gpt2: a draft hint for the smallest model" || true
    ls "$tmp/models/gpt2" | grep -q '\.part$' && fail "gpt2: .part files left behind" || true
else
    fail "gpt2: download from the mirror failed: $(cat "$tmp/out")"
fi

# 2. A second run finds everything complete and fetches nothing.
touch -d '2000-01-01' "$tmp/models/gpt2/model.safetensors"
if run_dl gpt2 "$tmp/models/gpt2" && [ "$(grep -c 'already complete' "$tmp/out")" -eq 5 ] \
        && [ "$(stat -c %Y "$tmp/models/gpt2/model.safetensors")" = "$(date -d '2000-01-01' +%s)" ]; then
    ok "rerun: complete files are not fetched again"
else
    fail "rerun: $(cat "$tmp/out")"
fi

# 3. A corrupted weights file (right size, wrong bytes) is refused and not installed.
med="$tmp/mirror/openai-community/gpt2-medium/resolve/main"
cp "$med/model.safetensors" "$tmp/good.safetensors"
printf 'X' | dd of="$med/model.safetensors" bs=1 seek=1000 conv=notrunc status=none
if run_dl gpt2-medium "$tmp/models/gpt2-medium"; then
    fail "corrupted: exit status 0"
else
    grep -q "model.safetensors: checksum mismatch: sha256" "$tmp/out" \
        && ok "corrupted: checksum mismatch reported" || fail "corrupted: message: $(cat "$tmp/out")"
    [ ! -e "$tmp/models/gpt2-medium/model.safetensors" ] && [ ! -e "$tmp/models/gpt2-medium/model.safetensors.part" ] \
        && ok "corrupted: nothing installed, bad part removed" || fail "corrupted: a bad file was left in place"
    [ -f "$tmp/models/gpt2-medium/config.json" ] && ok "corrupted: the good files were still installed" \
        || fail "corrupted: config.json missing"
fi

# 4. A truncated file is refused by its size.
head -c 1000 "$tmp/good.safetensors" > "$med/model.safetensors"
if ! run_dl gpt2-medium "$tmp/models/gpt2-medium" && grep -q "size 1000 bytes, published 300006" "$tmp/out"; then
    ok "truncated: size mismatch reported"
else
    fail "truncated: $(cat "$tmp/out")"
fi

# 5. Resume: a partial .part is continued, not restarted, and the result verifies.
cp "$tmp/good.safetensors" "$med/model.safetensors"
head -c 100000 "$tmp/good.safetensors" > "$tmp/models/gpt2-medium/model.safetensors.part"
if run_dl gpt2-medium "$tmp/models/gpt2-medium" \
        && cmp -s "$tmp/good.safetensors" "$tmp/models/gpt2-medium/model.safetensors"; then
    ok "resume: partial download completed and verified"
    grep -q -- "--draft $tmp/models/gpt2" "$tmp/out" && ok "gpt2-medium: suggests gpt2 as the draft" \
        || fail "gpt2-medium: no --draft hint: $(cat "$tmp/out")"
else
    fail "resume: $(cat "$tmp/out")"
fi
# A part whose first bytes are wrong resumes into a file that fails the checksum: refused.
head -c 100000 /dev/zero > "$tmp/models/gpt2-medium/model.safetensors.part"
rm -f "$tmp/models/gpt2-medium/model.safetensors"
if ! run_dl gpt2-medium "$tmp/models/gpt2-medium" && grep -q "checksum mismatch" "$tmp/out" \
        && [ ! -e "$tmp/models/gpt2-medium/model.safetensors" ]; then
    ok "resume: a corrupt partial file is caught by the checksum"
else
    fail "resume of a corrupt part: $(cat "$tmp/out")"
fi

# 6. A file missing from the mirror is an error naming the file.
rm "$tmp/mirror/distilbert/distilgpt2/resolve/main/generation_config.json"
if ! run_dl distilgpt2 "$tmp/models/distilgpt2" && grep -q "generation_config.json: not found" "$tmp/out"; then
    ok "missing: reported by name"
else
    fail "missing: $(cat "$tmp/out")"
fi

# 7. No published checksum: downloaded, with a warning that says so.
rm "$tmp/mirror/distilbert/distilgpt2/resolve/main/"*.headers
make_repo distilbert/distilgpt2 distil
rm "$tmp/mirror/distilbert/distilgpt2/resolve/main/merges.txt.headers"
if run_dl distilgpt2 "$tmp/models/distilgpt2" && grep -q "warning: merges.txt: no checksum published" "$tmp/out"; then
    ok "unpublished: warning printed"
else
    fail "unpublished: $(cat "$tmp/out")"
fi

# 8. Offline: a clear message and exit status 2 (port 9 on localhost refuses connections).
HF_ENDPOINT=http://127.0.0.1:9 bash "$script" gpt2 "$tmp/models/off" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "no network?" "$tmp/out"; then
    ok "offline: exit 2 with a message"
else
    fail "offline: rc $rc: $(cat "$tmp/out")"
fi

# 9. Usage errors.
bash "$script" gpt3 > "$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "usage:" "$tmp/out" && ok "usage: unknown model refused" || fail "usage: $(cat "$tmp/out")"

# 10. The make target runs the script with MODEL.
if make -s --no-print-directory gpt2 MODEL=gpt2 HF_ENDPOINT="$mirror" GPT2_DEST="$tmp/models/viamake" \
        > "$tmp/out" 2>&1 && cmp -s "$src/model.safetensors" "$tmp/models/viamake/model.safetensors"; then
    ok "make gpt2 MODEL=gpt2 downloads"
else
    fail "make gpt2: $(cat "$tmp/out")"
fi

finish
