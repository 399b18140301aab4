#!/usr/bin/env bash
# Installs the Debian packages tokentop needs to build and test, printing what it installs.
# Usage: tools/deps.sh [--check]   (--check: only report what is missing, exit 1 if anything is)
set -eu

# Why each one (the README says the same):
#   gcc make pkg-config       the build
#   libcjson-dev              JSON: safetensors headers, config.json, vocab.json (keeps duplicate keys
#                             visible, which the safetensors validation needs)
#   libpcre2-dev              the GPT-2 pre-tokenizer regex with Unicode properties (\p{L}, \p{N})
#   libncurses-dev            the terminal UI (wide-character ncursesw)
#   check libsubunit-dev      unit tests (Check links against subunit on Debian)
#   tmux                      end-to-end tests drive the real binary inside tmux
#   curl                      make gpt2 downloads checkpoints; tests/e2e/download_gpt2.sh runs it on a file:// mirror
packages=(gcc make pkg-config libcjson-dev libpcre2-dev libncurses-dev check libsubunit-dev tmux curl)

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
    echo "tokentop: missing packages: ${missing[*]}" >&2
    exit 1
fi

echo "tokentop: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "tokentop: need root or sudo to install: ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "tokentop: installed ${missing[*]}"
