#!/usr/bin/env bash
# Downloads an official GPT-2 checkpoint from the Hugging Face hub into models/<name>/, verified.
#
# Usage: tools/download_gpt2.sh MODEL [DEST]     (make gpt2 MODEL=... runs it)
#   MODEL  gpt2 | gpt2-medium | gpt2-large | gpt2-xl | distilgpt2
#   DEST   directory to fill (default models/MODEL)
# Environment:
#   HF_ENDPOINT   hub base URL (default https://huggingface.co); any curl URL works, file:// too
#   HF_REVISION   branch, tag or commit (default main)
#   CURL          curl binary (default curl)
#
# Files: config.json, model.safetensors, vocab.json, merges.txt, generation_config.json, from
# $HF_ENDPOINT/<repo>/resolve/<revision>/<file>. Each is fetched with curl --fail, retries and
# resume (a partial download is kept as <file>.part and continued on the next run), then verified
# before it is moved into place:
#   - LFS files (the weights): the hub's HEAD answer carries X-Linked-Size (bytes) and
#     X-Linked-ETag (the sha256 of the content); both are checked.
#   - Regular files (json, txt): the ETag is the git blob id, sha1("blob <size>\0" + content);
#     it is checked, and the size against Content-Length when the server sends it.
# A mirror that cannot send these headers (a file:// tree, a plain web server) may put them in a
# sidecar <file>.headers next to <file>, written as HTTP header lines ("X-Linked-Size: 123",
# "X-Linked-ETag: \"<sha256>\"", or "ETag: \"<git blob sha1>\""); it is read when the HEAD answer
# has no ETag. A file with no published checksum is downloaded with a warning saying so.
# A file already in DEST that matches its published checksum is not fetched again.
# Exit status: 0 done, 1 download or verification failed, 2 usage error or no network.
set -u

die() { echo "download_gpt2: $*" >&2; exit 1; }

model=${1:-}
case "$model" in
    gpt2|gpt2-medium|gpt2-large|gpt2-xl) repo="openai-community/$model" ;;
    distilgpt2) repo="distilbert/distilgpt2" ;;
    *)
        echo "usage: tools/download_gpt2.sh gpt2|gpt2-medium|gpt2-large|gpt2-xl|distilgpt2 [DEST]" >&2
        echo "       (make gpt2 MODEL=gpt2-medium)" >&2
        exit 2 ;;
esac
dest=${2:-models/$model}
endpoint=${HF_ENDPOINT:-https://huggingface.co}
endpoint=${endpoint%/}
revision=${HF_REVISION:-main}
curl_bin=${CURL:-curl}
files=(config.json generation_config.json vocab.json merges.txt model.safetensors)

command -v "$curl_bin" >/dev/null 2>&1 || { echo "download_gpt2: curl not found (apt-get install curl)" >&2; exit 2; }
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"
mkdir -p "$dest" || die "cannot create $dest"

# ---------------------------------------------------------------------------------------------
# Published size and checksum of one file

# Prints the value of header $2 (case-insensitive) from the header text $1: the first occurrence,
# quotes and a weak-validator W/ prefix removed.
header_value() {
    printf '%s\n' "$1" | tr -d '\r' | awk -v h="$(printf '%s' "$2" | tr 'A-Z' 'a-z')" '
        { i = index($0, ":"); if (i == 0) next
          name = tolower(substr($0, 1, i - 1))
          if (name == h) { v = substr($0, i + 1); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
                           sub(/^W\//, "", v); gsub(/"/, "", v); print v; exit } }'
}

# The header block of the last response (after redirects) in curl -I -L output.
last_block() {
    printf '%s\n' "$1" | tr -d '\r' | awk '/^HTTP\// { block = "" } { block = block $0 "\n" } END { printf "%s", block }'
}

# Sets kind (lfs|git|none), want_size (or empty) and want_hash for file $1 at URL $2.
# Returns 2 when the endpoint cannot be reached, 1 when the file is missing there.
fetch_meta() {
    local name=$1 url=$2 head rc status
    kind=none want_size= want_hash=
    head=$("$curl_bin" -sS -I -L --retry 2 --connect-timeout 20 "$url" 2>&1)
    rc=$?
    case $rc in
        0) ;;
        5|6|7|28|35|52|56)
            echo "download_gpt2: cannot reach $endpoint (curl exit $rc: ${head##*curl: })" >&2
            echo "download_gpt2: no network? make gpt2 needs internet access to $endpoint;" \
                 "the embedded models in models/kjv-target and models/kjv-draft need none" >&2
            return 2 ;;
        37) echo "download_gpt2: $name: not found at $url" >&2; return 1 ;;
        *) echo "download_gpt2: $name: HEAD $url failed (curl exit $rc: $head)" >&2; return 1 ;;
    esac
    # file:// answers have no status line; http(s) ones end with the final response's status.
    # An LFS file's metadata comes from the hub's redirect; the storage host's answer to HEAD
    # does not matter then.
    status=$(printf '%s\n' "$(last_block "$head")" | awk 'NR == 1 && /^HTTP\// { print $2 }')
    [ -n "$(header_value "$head" x-linked-etag)" ] && status=200
    case "$status" in
        ""|2*) ;;
        401|403) echo "download_gpt2: $name: $url answers $status (gated or private; set up access first)" >&2; return 1 ;;
        404) echo "download_gpt2: $name: not found at $url (HTTP 404: model name or revision wrong?)" >&2; return 1 ;;
        *) echo "download_gpt2: $name: $url answers HTTP $status" >&2; return 1 ;;
    esac
    if ! meta_from_headers "$head"; then
        local side
        if side=$("$curl_bin" -sS --fail "$url.headers" 2>/dev/null); then
            meta_from_headers "$side" || true
        fi
    fi
    if [ "$kind" = git ] && [ -z "$want_size" ]; then
        want_size=$(header_value "$(last_block "$head")" content-length)
    fi
    return 0
}

# Reads kind/want_size/want_hash from header text $1; returns 1 when it holds no checksum.
meta_from_headers() {
    local lsize letag etag
    lsize=$(header_value "$1" x-linked-size)
    letag=$(header_value "$1" x-linked-etag)
    if [ -n "$letag" ]; then
        kind=lfs want_size=$lsize want_hash=$letag
        return 0
    fi
    etag=$(header_value "$(last_block "$1")" etag)
    if [ -n "$etag" ]; then
        case "$etag" in
            *[!0-9a-f]*) ;;                      # not a content hash (a server's own ETag)
            ????????????????????????????????????????) kind=git want_hash=$etag; return 0 ;;
            ????????????????????????????????????????????????????????????????) kind=lfs want_hash=$etag; return 0 ;;
        esac
    fi
    return 1
}

file_size() { stat -c %s "$1"; }

# Prints the checksum of file $1 in the form kind $2 uses.
file_hash() {
    case "$2" in
        lfs) sha256sum "$1" | awk '{ print $1 }' ;;
        git) { printf 'blob %d\0' "$(file_size "$1")"; cat "$1"; } | sha1sum | awk '{ print $1 }' ;;
        *) echo "" ;;
    esac
}

# 0 when file $1 has want_size and want_hash (missing expectations are not checked).
file_ok() {
    [ -f "$1" ] || return 1
    if [ -n "$want_size" ] && [ "$(file_size "$1")" != "$want_size" ]; then return 1; fi
    [ "$kind" = none ] && return 0
    [ "$(file_hash "$1" "$kind")" = "$want_hash" ]
}

# ---------------------------------------------------------------------------------------------
# Download

echo "download_gpt2: $repo@$revision from $endpoint -> $dest/"
failed=0
for f in "${files[@]}"; do
    url="$endpoint/$repo/resolve/$revision/$f"
    fetch_meta "$f" "$url"
    rc=$?
    if [ $rc -eq 2 ]; then exit 2; fi
    if [ $rc -ne 0 ]; then failed=1; continue; fi
    out="$dest/$f"
    if [ -f "$out" ] && [ "$kind" != none ] && file_ok "$out"; then
        echo "  $f: already complete ($(file_size "$out") bytes, $kind checksum ok)"
        continue
    fi
    part="$out.part"
    # A part that already has the full size is not resumed (the server would answer 416).
    if [ -f "$part" ] && [ -n "$want_size" ] && [ "$(file_size "$part")" -ge "$want_size" ]; then
        :
    else
        echo "  $f: downloading${want_size:+ ($want_size bytes)}"
        if ! "$curl_bin" -sS --fail -L --retry 5 --retry-delay 2 --connect-timeout 20 \
                -C - -o "$part" "$url"; then
            echo "download_gpt2: $f: download from $url failed (partial data kept in $part; run again to resume)" >&2
            failed=1
            continue
        fi
    fi
    got_size=$(file_size "$part")
    if [ -n "$want_size" ] && [ "$got_size" != "$want_size" ]; then
        echo "download_gpt2: $f: size $got_size bytes, published $want_size; removed $part" >&2
        rm -f "$part"
        failed=1
        continue
    fi
    if [ "$kind" = none ]; then
        echo "download_gpt2: warning: $f: no checksum published by $endpoint; not verified" >&2
    else
        got_hash=$(file_hash "$part" "$kind")
        if [ "$got_hash" != "$want_hash" ]; then
            echo "download_gpt2: $f: checksum mismatch: $([ "$kind" = lfs ] && echo sha256 || echo 'git blob sha1')" \
                 "$got_hash, published $want_hash; removed $part" >&2
            rm -f "$part"
            failed=1
            continue
        fi
    fi
    mv -f "$part" "$out" || die "cannot move $part to $out"
    echo "  $f: ok ($got_size bytes${kind:+, }$([ "$kind" = lfs ] && echo "sha256 verified" || { [ "$kind" = git ] && echo "git blob sha1 verified" || echo "unverified"; }))"
done

if [ $failed -ne 0 ]; then
    echo "download_gpt2: $model: some files failed; nothing was left half-written in $dest (run again to retry)" >&2
    exit 1
fi

echo "download_gpt2: $model ready in $dest"
echo "Run it:"
echo "  ./tokentop --model $dest"
case "$model" in
    gpt2-medium|gpt2-large|gpt2-xl)
        echo "With speculative decoding (gpt2 as the draft; make gpt2 MODEL=gpt2 first):"
        echo "  ./tokentop --model $dest --draft $(dirname "$dest")/gpt2" ;;
esac
exit 0
