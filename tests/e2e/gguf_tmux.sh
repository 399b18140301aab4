#!/usr/bin/env bash
# End-to-end check in tmux of a GGUF model in the REPL: the status bar names the file's
# quantization and bits a weight beside its name, and /show names them; a Q4_K_M file is held
# as stored and /show's engine line says so.
set -u
source "$(dirname "$0")/tmux.bash"
fx=$PWD/tests/fixtures/gguf
# open FILE WIDTH: the REPL on fixture FILE in a WIDTH x 30 session "main"
open_repl() {
    T -f /dev/null new-session -d -s main -x "$2" -y 30 \
        "env LANG=C.UTF-8 TERM=screen-256color $BIN --model $fx/$1 --threads 1 --backend cpu; sleep 30"
    T set-option -t main -g status off >/dev/null
}
open_repl tiny-llama-q8_0.gguf 120
check "the status bar names the file, its quantization and bits a weight" \
    wait_for 'tiny-llama-q8_0\.gguf Q8_0 [0-9.]+ bpw │ cpu.* q8 '
type_line "/show"
check "/show names the file's quantization" wait_for 'file +GGUF Q8_0, [0-9.]+ bits a weight'
new_server
open_repl tiny-llama-256-q4_k_m.gguf 160
check "a Q4_K_M file: the status bar names it and its bits a weight" \
    wait_for 'tiny-llama-256-q4_k_m\.gguf Q4_K_M [0-9.]+ bpw │ cpu'
type_line "/show"
check "/show: the Q4_K_M file's bits a weight" wait_for 'Q4_K_M, [0-9.]+ bits a weight'
check "/show: the engine holds its blocks as stored" wait_for 'Q4_K_M \([0-9.]+ bits a weight\) as stored'
finish
