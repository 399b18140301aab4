#!/usr/bin/env bash
# Installs the Debian packages that `make models` (and only it) needs, printing what it installs.
# Usage: tools/train/deps.sh [--check]   (--check: only report what is missing, exit 1 if anything is)
set -eu

# Why each one:
#   bible-kjv bible-kjv-text   the corpus: `bible -f 'Gen1:1-Rev22:21'` prints the King James text
#   python3 python3-numpy      the training scripts (Debian's /usr/bin/python3, no PyPI)
#   python3-torch              the model and the training loop (Debian's PyTorch 1.13)
#   python3-regex              GPT-2's pre-tokenizer regex needs \p{L} and \p{N}, which `re` lacks
packages=(bible-kjv bible-kjv-text python3 python3-numpy python3-torch python3-regex)

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing+=("$p") ;;
    esac
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "make models: missing packages: ${missing[*]}" >&2
    exit 1
fi

echo "make models: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "make models: need root or sudo to install: ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "make models: installed ${missing[*]}"
