#!/usr/bin/env bash
# attention_tmux.sh: the attention view (/attn, --attn) in the real REPL inside a private tmux
# server, on the embedded model at 120x34 and 80x24: the pane under the histogram names the step
# shown and lists the earlier tokens it attended to most; in "And Moses stretched forth his", the
# step after " his" (the query " his") attends most to " Moses" in layer 4; /attn back moves the
# view to an earlier step; layer, head and N.H choose; bad input gets one clear line and the
# session goes on; /attn off removes the pane.
# Every wait polls the screen with a deadline, so a loaded machine only makes it slower.
set -u
MODEL=$(cd "$(dirname "$0")/../.." && pwd)/models/kjv-target
. "$(dirname "$0")/tmux.bash"
[ -f "$MODEL/config.json" ] || { echo "FAIL: the embedded model $MODEL is missing"; exit 1; }

start() {   # start COLS ROWS
    new_server
    T -f /dev/null new-session -d -s main -x "$1" -y "$2" \
        "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
         TOKENTOP_HISTORY=$work/history $BIN --model $MODEL --backend cpu --threads 1 --greedy \
         -n 1 --pace 0 --attn; echo EXIT=\$?; sleep 30"
    T set-option -t main -g status off >/dev/null
    wait_for 'Send a message' || exit 1
}
# the list row of the pane that follows the line matching $1 (the selection line)
row_after() { screen | grep -A1 -E -- "$1" | tail -1; }

for size in "120 34" "80 24"; do
    set -- $size
    echo "-- ${1}x$2"
    start "$1" "$2"
    check "--attn starts the view (${1}x$2): its pane shows before the first step" \
        wait_for 'Attention' 5
    type_line "And Moses stretched forth his"
    check "after the turn the pane shows the step that drew ' hand' (${1}x$2)" \
        wait_for 'Attention · token 5 ␣hand' 30
    type_line "/attn layer 4"
    check "/attn layer 4 confirms in one line" wait_for 'attention view on: layer 4, mean of 4 heads' 10
    check "layer 4: the query ' his' attends most to ' Moses' (${1}x$2)" \
        bash -c "$(declare -f row_after screen T); sock=$sock; row_after '(│|^) layer 4, mean of 4 heads$' | grep -q '1 ␣Moses'"
    type_line "/attn layer 99"
    check "/attn layer 99 gets one clear line" wait_for "/attn layer 99: this model's layers are 0 .. 5" 10
    type_line "/attn head -1"
    check "/attn head -1 gets one clear line" wait_for "/attn head -1: this model's heads are 0 .. 3" 10
    type_line ""   # the session goes on: Enter continues by one token
    check "after bad input the session goes on, the view with it" \
        wait_for 'Attention · token 6 ,' 30
    type_line "/attn back"
    check "/attn back moves the view to the step before (${1}x$2)" \
        wait_for 'Attention · token 5 ␣hand +1 step back' 10
    type_line "/attn back 3"
    check "/attn back past the steps kept says how many there are" \
        wait_for '/attn back: 1 earlier step is kept' 10
    type_line "/attn latest"
    check "/attn latest returns to the latest step" wait_for 'Attention · token 6 , *$' 10
    type_line "/attn 4.2"
    check "/attn 4.2 chooses head 2 of layer 4" wait_for 'layer 4, head 2' 10
    type_line "/attn avg"
    check "/attn avg goes back to the mean" wait_for 'mean of 6 layers x 4 heads' 10
    type_line "/attn off"
    check "/attn off removes the pane" wait_gone 'Attention ·' 10
    type_line "/attn"
    check "/attn alone toggles it back on" wait_for 'attention view on: mean of 6 layers' 10
done
type_line "/quit"
wait_for 'EXIT=0' 10 || fail "the REPL did not exit cleanly"
finish
