#!/usr/bin/env bash
# demo_tmux.sh: a scripted REPL session in a private tmux server, printed as text screenshots
# (tmux capture-pane -p) with the keys that led to each one. The README's screenshots come from it:
#
#   prompts/demo_tmux.sh [--model DIR] [--bin PATH] [--cols N] [--rows N] [--seed S] [--compare]
#
# --compare plays the degeneration demo instead (prompts/degeneration.txt on screen): /compare temp
# (greedy against sampling), /beam 4, /compare repeat.
#
# Default model: the embedded one (whatever tokentop finds without --model).
set -u
BIN=./tokentop
MODEL=
COLS=104
ROWS=32
SEED=42
SCENE=tour
while [ $# -gt 0 ]; do
    case $1 in
        --model) MODEL=$2; shift 2 ;;
        --bin) BIN=$2; shift 2 ;;
        --cols) COLS=$2; shift 2 ;;
        --rows) ROWS=$2; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --compare) SCENE=compare; shift ;;
        *) echo "usage: $0 [--model DIR] [--bin PATH] [--cols N] [--rows N] [--seed S] [--compare]" >&2; exit 2 ;;
    esac
done
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
[ -n "$MODEL" ] && MODEL=$(cd "$MODEL" && pwd)
sock="tokentop-demo-$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/tokentop-demo-XXXXXX")
T() { tmux -L "$sock" "$@"; }
trap 'T kill-server 2>/dev/null; rm -rf "$work"' EXIT

wait_for() {
    local end=$((SECONDS + ${2:-60}))
    while [ $SECONDS -lt $end ]; do
        T capture-pane -p -t demo | grep -Eq -- "$1" && return 0
        sleep 0.2
    done
    echo "(timed out waiting for: $1)" >&2
    return 1
}

shot() {
    echo
    echo "\$ # $1"
    echo '```'
    T capture-pane -p -t demo | sed -e 's/[[:space:]]*$//'
    echo '```'
}

keys() {
    T send-keys -t demo -l -- "$1"
    T send-keys -t demo Enter
}

args="--seed $SEED"
[ -n "$MODEL" ] && args="--model $MODEL $args"
cmd="tokentop $args"
T -f /dev/null new-session -d -s demo -x "$COLS" -y "$ROWS" \
    "env LANG=C.UTF-8 TOKENTOP_HISTORY=$work/history $BIN $args"
T set-option -t demo -g status off >/dev/null
wait_for 'Send a message' || exit 1
echo "Started with: $cmd   (a ${COLS}x${ROWS} terminal)"

if [ "$SCENE" = compare ]; then
    P="And the LORD said unto Moses,"
    for k in "/max 30" "/topk 0" "/topp 1" "/compare temp 0 0.7 1.2"; do keys "$k"; done
    keys "$P"
    wait_for '3: temp 1.2' && sleep 0.3
    shot "typed: /max 30, /topk 0, /topp 1, /compare temp 0 0.7 1.2, then: $P"
    keys ""
    for k in "/undo" "/beam 4"; do keys "$k"; done
    keys "$P"
    wait_for 'beam search: 4 beams, [0-9]+ steps' && sleep 0.3
    shot "typed: Enter (closes the columns), /undo, /beam 4, then: $P"
    keys ""
    for k in "/undo" "/temp 0" "/compare repeat 1 1.2 1.5"; do keys "$k"; done
    keys "$P"
    wait_for '3: repeat 1.5' && sleep 0.3
    shot "typed: Enter, /undo, /temp 0, /compare repeat 1 1.2 1.5, then: $P"
    keys "/keep 2"
    wait_for 'kept 2' && sleep 0.3
    shot "typed: /keep 2 (the column becomes the reply; the next-token view continues from it)"
    keys "/quit"
    sleep 0.5
    exit 0
fi

keys "In the beginning God created"
wait_for 'tok/s .*reused' && sleep 0.3
shot "typed: In the beginning God created"

keys "/temp 0.7"
keys "/topk 8"
wait_for 'topk 8' && wait_for 'Next token at' 20 && sleep 0.3
shot "typed: /temp 0.7, then /topk 8 (the histogram shows the next token under the new settings)"

keys "And God said"
wait_for 'tok/s .*reused [1-9]' && sleep 0.3
shot "typed: And God said (the first turn stays in the KV cache: reused vs prefilled)"

keys "/step on"
keys ""
wait_for 'Step 1 ' && keys "" && wait_for 'Step 2 ' && sleep 0.3
shot "typed: /step on, then Enter twice (one token per Enter)"

keys "/pick 2"
wait_for "picked #2" && sleep 0.3
shot "typed: /pick 2 (the second token of the histogram replaces the one just drawn)"

keys "/step off"
T resize-window -t demo -x 80 -y 32
keys "/undo"
wait_for 'dropped' && sleep 0.3
shot "typed: /step off, /undo; the terminal narrowed to 80 columns (histogram below)"

keys "/quit"
sleep 0.5
