#!/usr/bin/env bash
# End-to-end check in tmux of a GGUF model in the REPL: the status bar names the file's
# quantization beside its name, and /show names it on the model line.
set -u
source "$(dirname "$0")/tmux.bash"
fx=$PWD/tests/fixtures/gguf
T -f /dev/null new-session -d -s main -x 120 -y 30 \
    "env LANG=C.UTF-8 TERM=screen-256color $BIN --model $fx/tiny-llama-q8_0.gguf --threads 1 --backend cpu; sleep 30"
T set-option -t main -g status off >/dev/null
check "the status bar names the file and its quantization" wait_for 'tiny-llama-q8_0\.gguf Q8_0 │ cpu.* q8 '
type_line "/show"
check "/show names the file's quantization" wait_for 'HS 8, file Q8_0'
finish
