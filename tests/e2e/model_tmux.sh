#!/usr/bin/env bash
# model_tmux.sh: /model in the real REPL inside tmux: a path that does not exist, a file that is
# not a model and an Ollama name that is not pulled are each refused in one line naming them,
# and the REPL keeps its model (status bar, a turn still generates); a GGUF file then replaces
# the model (the status bar names it and its quantization), the conversation is cleared with a
# note, and the new model generates.
set -u
source "$(dirname "$0")/tmux.bash"
fx=$PWD/tests/fixtures/gguf
"$MKMODEL" "$work/model" --ctx 256 --seed 3 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
mkdir -p "$work/ollama" "$work/home"
printf 'not a model\n' > "$work/junk.gguf"
T -f /dev/null new-session -d -s main -x 120 -y 36 \
    "env LANG=C.UTF-8 TERM=screen-256color HOME=$work/home OLLAMA_MODELS=$work/ollama \
     TOKENTOP_HISTORY=$work/history $BIN --model $work/model --backend cpu --threads 1 -n 6 \
     --seed 7; sleep 30"
T set-option -t main -g status off >/dev/null
check "the REPL starts on its model" wait_for 'model │ cpu'
type_line "In the beginning"
check "a first turn generates" wait_for '[0-9.]+ tok/s'

type_line "/model $work/nothing-here"
check "a missing path is refused, named" \
    wait_for "/model: $work/nothing-here: no such directory"
check "... and the model is kept" wait_for '\(kept model\)'
type_line "/model $work/junk.gguf"
check "a file that is not a model is refused, named" \
    wait_for "/model: $work/junk.gguf: not a directory or a GGUF file"
type_line "/model nosuch:7b"
check "an Ollama name that is not pulled says where it looked" \
    wait_for "nosuch:7b: not in the Ollama store \(looked for"
check "the status bar still names the first model" wait_for '^ ?model │ cpu'
type_line " and the earth"
type_line "/show"
check "the first model still generates" wait_for 'conversation [0-9]+ tokens in 2 turns'

type_line "/model $fx/tiny-llama-q8_0.gguf"
check "a GGUF file replaces the model: the status bar names it and its quantization" \
    wait_for 'tiny-llama-q8_0\.gguf Q8_0 [0-9.]+ bpw │ cpu'
check "the conversation is cleared with a note" wait_for 'the conversation \([0-9]+ tokens of model'
type_line "hello"
type_line "/show"
check "the new model generates a turn" wait_for 'conversation [1-9][0-9]* tokens in 1 turn'
check "/show names the new model" wait_for 'model +tiny-llama-q8_0\.gguf'
finish
