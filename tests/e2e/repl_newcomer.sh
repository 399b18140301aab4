#!/usr/bin/env bash
# repl_newcomer.sh: what a new user met in the REPL (issue 25), in a private tmux server: under
# /pace the histogram shows the step whose token was just written; a line sent during a reply
# waits for its end (it is not mixed into the next input) and command output made during a reply
# comes after it; Ctrl-D during a reply does not quit; /spec off during a speculative reply leaves
# no speculative figures beside the plain mode; plain tokentop loads the embedded draft; /pace
# holds the steps of /beam.
# Every wait polls the screen with a deadline, so a loaded machine only makes it slower.
set -u
BIN_ORIG=${BIN:-build/tokentop}   # tmux.bash copies the binary away from models/
. "$(dirname "$0")/tmux.bash"

"$MKMODEL" "$work/model" --ctx 256 --seed 3 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
"$MKMODEL" "$work/draft" --ctx 256 --seed 3 --layers 1 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
T -f /dev/null new-session -d -s main -x 120 -y 34 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
     TOKENTOP_HISTORY=$work/history $BIN --model $work/model --draft $work/draft --spec off \
     --backend cpu --threads 1 --seed 5 -n 6 --ignore-eos; echo EXIT=\$?; sleep 30"
T set-option -t main -g status off >/dev/null
wait_for 'Send a message' || exit 1

turn_over() { wait_for '[0-9.]+ tok/s' "${1:-30}"; }

# --- 1. /pace 2: the histogram's step is the token just written (status "generating N" counts
# the tokens written; the histogram's title "Step N · token P" names the step it shows)
type_line "/pace 2"
wait_for 'pace 2 tokens/s' 10 || fail "/pace 2: no confirmation"
type_line "And God said"
wait_for 'generating [0-9]+' 10 || fail "the paced turn did not start"
agree=0 differ=0
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ]; do
    s=$(screen)
    n=$(echo "$s" | grep -Eo 'generating [0-9]+' | grep -Eo '[0-9]+' | head -1)
    k=$(echo "$s" | grep -Eo 'Step [0-9]+ · token' | grep -Eo '[0-9]+' | head -1)
    [ -z "$n" ] && break   # the turn is over
    if [ -n "$k" ]; then
        if [ "$n" = "$k" ]; then agree=$((agree + 1)); else
            differ=$((differ + 1)); echo "  written $n, histogram at step $k"; fi
    fi
    sleep 0.13
done
check "under /pace the histogram shows the step just written ($agree samples agree, $differ differ)" \
    test "$agree" -gt 5 -a "$differ" -eq 0
turn_over || fail "the paced turn did not finish"

# --- 2. a line sent during a reply is queued, not mixed into the next input; command output
# made during the reply comes after it
type_line "/temp 0.9"
wait_for 'temp 0.9' 10 || fail "/temp 0.9: no confirmation"
type_line "And the earth"
wait_for 'generating [0-9]+' 10 || fail "the second turn did not start"
type_line "Hello there"
wait_for 'queued' 5 || fail "a line sent during a reply does not say it is queued"
type_line "/temp 0.5"
wait_for '/temp: output after the reply' 5 || fail "a command during a reply does not say where its output goes"
check "the queued line is not left in the input to be mixed with the next one" \
    bash -c "! tmux -L '$sock' capture-pane -p -t main | grep -q 'Hello there/temp'"
# the reply ends, then the queued line runs as the next turn
wait_for 'Hello there' 30 || fail "the queued line was not sent"
turn_over || fail "the queued turn did not finish"
check "/temp 0.5 typed during the reply took effect" \
    bash -c "tmux -L '$sock' capture-pane -p -t main | grep -q ' temp 0.5 '"
check "its output is not inside the reply (it follows the reply's text on a line of its own)" \
    bash -c "tmux -L '$sock' capture-pane -p -t main | grep -Eq '^ *temp 0.5 \(was 0.9\)'"

# --- 3. Ctrl-D during a reply does not quit (nor lose the conversation)
type_line "/max 12"
type_line "And there was light"
wait_for 'generating [0-9]+' 10 || fail "the third turn did not start"
T send-keys -t main C-d
sleep 0.5
check "Ctrl-D during a reply leaves tokentop running" \
    bash -c "! tmux -L '$sock' capture-pane -p -t main | grep -q 'EXIT='"
wait_for 'Ctrl-D quits at an empty prompt' 5 || fail "Ctrl-D during a reply says nothing"
turn_over || fail "the turn after Ctrl-D did not finish"

# --- 4. /spec off during a speculative reply: no speculative figures beside the plain mode
type_line "/spec on"
wait_for 'speculative decoding on' 10 || fail "/spec on: no confirmation"
type_line "/max 24"
type_line "And God saw"
wait_for 'generating [0-9]+' 10 || fail "the speculative turn did not start"
wait_for 'generating ([4-9]|1[0-9])' 20 || fail "the speculative turn did not get going"
type_line "/spec off"
turn_over || fail "the mixed turn did not finish"
s=$(screen | grep -E 'tok/s')
check "after /spec off mid-reply the status bar shows no acceptance or speedup ($s)" \
    bash -c "! echo '$s' | grep -Eq 'accept [0-9]+%|x plain'"

# --- 5. Ctrl-D at an empty prompt still quits at once
T send-keys -t main C-d
wait_for 'EXIT=0' 10 || fail "Ctrl-D at an empty prompt did not quit"

# --- 6. plain tokentop (the embedded target) loads the embedded draft beside it, off, and says
# /spec on turns it on (the binary is the build's, which finds models/ beside the checkout)
if [ -d models/kjv-draft ]; then
    new_server
    T -f /dev/null new-session -d -s main -x 120 -y 34 \
        "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
         TOKENTOP_HISTORY=$work/history $(realpath "$BIN_ORIG") --backend cpu -n 8"
    wait_for 'Send a message' || exit 1
    wait_for 'Draft model .*kjv-draft loaded' 5 && wait_for '/spec on turns it on' 5 \
        || fail "plain tokentop does not load the embedded draft (or does not say so)"
    type_line "/spec on"
    wait_for 'speculative decoding on' 5 || fail "/spec on with the embedded draft"
    # --- 7. /pace holds the steps of /beam as it holds a reply's tokens: 10 steps at 10/s
    type_line "/spec off"
    type_line "/pace 10"
    wait_for 'pace 10 tokens/s' 5 || fail "/pace 10: no confirmation"
    type_line "/max 10"
    type_line "/beam 2"
    wait_for 'next line: beam search with 2 beams' 5 || fail "/beam 2: not armed"
    t0=$(date +%s.%N)
    type_line "In the beginning"
    wait_for 'Enter closes the columns' 30 || fail "the beam search did not end"
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    check "/beam 2 at /pace 10 shows its 10 steps at the pace (took $dt s)" \
        awk -v x="$dt" 'BEGIN { exit !(x >= 0.8) }'
fi
finish
