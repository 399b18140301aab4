#!/usr/bin/env bash
# Installs missing Debian packages, printing what it installs. One script for every make target.
# Usage: tools/deps.sh [--check] [--train | --fuzz]
#   --check   only report what is missing (exit 1 if anything is)
#   --train   the packages `make models` needs (retraining the embedded models) instead of the
#             build-and-test set
#   --fuzz    the packages the fuzzers need (`make fuzz`, and the fuzz step of `make test`)
set -eu

check=0 train=0 fuzz=0
for a in "$@"; do
    case "$a" in
        --check) check=1 ;;
        --train) train=1 ;;
        --fuzz) fuzz=1 ;;
        *) echo "tools/deps.sh: unknown option '$a' (use --check, --train, --fuzz)" >&2; exit 2 ;;
    esac
done

if [ $fuzz -eq 1 ]; then
    # Why each one:
    #   clang              libFuzzer and its coverage instrumentation (-fsanitize=fuzzer); gcc has
    #                      no coverage-guided fuzzer
    #   libclang-rt-dev    the libFuzzer, ASan and UBSan runtime libraries clang links
    who="make fuzz"
    packages=(clang libclang-rt-dev)
elif [ $train -eq 0 ]; then
    # Why each one (the README says the same):
    #   gcc make pkg-config       the build
    #   libcjson-dev              JSON: safetensors headers, config.json, vocab.json (keeps duplicate
    #                             keys visible, which the safetensors validation needs)
    #   libpcre2-dev              the GPT-2 pre-tokenizer regex with Unicode properties (\p{L}, \p{N})
    #   libutf8proc-dev           Unicode NFC, the normalizer tokenizer.json files name (Qwen)
    #   libncurses-dev            the terminal UI (wide-character ncursesw)
    #   check libsubunit-dev      unit tests (Check links against subunit on Debian)
    #   tmux                      end-to-end tests drive the real binary inside tmux
    #   curl                      make gpt2 downloads checkpoints; tests/e2e/download_gpt2.sh runs it
    #                             on a file:// mirror
    who="tokentop"
    packages=(gcc make pkg-config libcjson-dev libpcre2-dev libutf8proc-dev libncurses-dev check libsubunit-dev
              tmux curl)
else
    # Why each one:
    #   bible-kjv bible-kjv-text   the corpus: `bible -f 'Gen1:1-Rev22:21'` prints the King James text
    #   python3 python3-numpy      the training scripts (Debian's /usr/bin/python3, no PyPI)
    #   python3-torch              the model and the training loop (Debian's PyTorch)
    #   libopenblas0-pthread       backs python3-torch's CPU math (about 50x faster than without)
    #   python3-regex              GPT-2's pre-tokenizer regex needs \p{L} and \p{N}, which `re` lacks
    #   diatheke sword-text-web    more training text: `diatheke -b engWEB2015eb` prints the World
    #                              English Bible (public domain) from the SWORD module
    who="make models"
    packages=(bible-kjv bible-kjv-text python3 python3-numpy python3-torch libopenblas0-pthread
              python3-regex diatheke sword-text-web)
fi

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
if [ $check -eq 1 ]; then
    echo "$who: missing packages: ${missing[*]}" >&2
    exit 1
fi

echo "$who: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "$who: need root or sudo to install: ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "$who: installed ${missing[*]}"
