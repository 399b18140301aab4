#!/usr/bin/env bash
# term_stress.sh: the REPL in terminals that are hard to draw in, inside a private tmux server: a
# storm of 50 resizes in 2 seconds while a generation streams, a 20x5 terminal, no UTF-8 locale
# (LANG=C LC_ALL=C: every cell falls back to ASCII, bars included), TERM=vt100 and TERM=dumb
# (line mode). Each time the screen must be coherent afterwards (one status bar, one input line,
# the histogram's rows) and the terminal given back on exit. Every case runs twice: unpaced and
# with the reply paced (--pace 20, what make run uses), where a reply refills little of the screen
# per frame, so cells a resize left behind stay unless the resize repaints every cell. A paced
# reply also gets a resize that reports an unchanged size after the terminal lost its cells (what
# a storm coalesced by the terminal does): the screen must then equal a fresh redraw (Ctrl-L).
set -u
. "$(dirname "$0")/tmux.bash"

"$MKMODEL" "$work/model" --ctx 256 --seed 3 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
T -f /dev/null new-session -d -s main -x 100 -y 30 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
     TOKENTOP_HISTORY= HISTFILE=/dev/null PS1='\$ ' bash --norc --noprofile"
T set-option -t main -g status off >/dev/null
wait_for '^\$' 20 || exit 1
type_line "ulimit -c 0"
type_line "stty -g > $work/stty.before"
for _ in $(seq 100); do [ -s "$work/stty.before" ] && break; sleep 0.1; done

# run_app ENV...: tokentop from the pane's shell with extra environment, then its exit status.
run_app() {
    type_line "clear; env $* $BIN --model $work/model --backend cpu --seed 7 -n 1000000 --ignore-eos --pace $pace; echo EXIT=\$?"
}

# faults SCREEN: what keeps a screen from being coherent, one line each (none: it is). A coherent
# screen holds one status bar, one input line and the histogram's header, and nothing else claims
# those rows.
faults() {
    [ "$(grep -c '^>>> ' <<<"$1")" -eq 1 ] || echo "not exactly one input line"
    [ "$(grep -cE 'KV [0-9]+/256' <<<"$1")" -eq 1 ] || echo "not exactly one status bar"
    grep -qE 'Step [0-9]+ .* token|Next token' <<<"$1" || echo "no histogram header"
    grep -q 'terminal too small' <<<"$1" && echo "still says the terminal is too small"
}

# coherent WHAT [SECONDS]: the screen is coherent, at once or within SECONDS. After a resize the
# wait is needed: tmux resizes its own screen at once but tells the application the new size a
# little later (it coalesces a burst of resizes), so the screen can only be right once the last
# size has arrived.
coherent() {
    local what=$1 end=$((SECONDS + ${2:-0})) s f
    while :; do
        s=$(screen)
        f=$(faults "$s")
        [ -z "$f" ] || [ $SECONDS -ge $end ] && break
        sleep 0.1
    done
    [ -z "$f" ] && return 0
    while IFS= read -r line; do fail "$what: $line"; done <<<"$f"
    sed 's/^/| /' <<<"$s"
}

# same_as_redraw WHAT: the screen equals what a fresh redraw (Ctrl-L) shows.
same_as_redraw() {
    local before after
    before=$(screen)
    T send-keys -t main C-l
    sleep 0.3
    after=$(screen)
    if [ "$before" != "$after" ]; then
        fail "$1: the screen differs from a fresh redraw (Ctrl-L)"
        diff <(echo "$before") <(echo "$after") | head -n 12 | sed 's/^/| /'
    fi
}

for pace in 0 20; do
echo "--- pace $pace"

# --- 1. a resize storm while a generation streams ------------------------------------------------
run_app
wait_for 'Send a message' || exit 1
type_line "In the beginning"
wait_for 'generating [0-9]+' || fail "storm: the generation did not start"
sizes=("60 20" "100 30" "35 8" "120 40" "41 10" "80 24" "20 5" "150 50" "45 12" "100 30")
# Ten tmux calls of five resizes each, 0.2 s apart: 50 resizes in about 2 seconds.
start=$(date +%s.%N)
for i in $(seq 0 9); do
    cmd=()
    for j in 0 1 2 3 4; do
        set -- ${sizes[(i + j) % 10]}
        cmd+=(resize-window -t main -x "$1" -y "$2" \;)
    done
    T "${cmd[@]}"
    sleep 0.2
done
echo "storm: 50 resizes in $(echo "$(date +%s.%N) - $start" | bc | cut -c1-4) s"
T resize-window -t main -x 100 -y 30
alive
wait_for 'generating [0-9]+' 10 || fail "storm: the generation did not survive the resizes"
T send-keys -t main C-c
wait_for '\[stopped after [0-9]+ tokens\]' || fail "storm: Ctrl-C did not stop the generation"
wait_for 'Send a message' 10 || fail "storm: no prompt after Ctrl-C"
coherent "after the storm (pace $pace)" 5
same_as_redraw "after the storm (pace $pace)"
T send-keys -t main C-d
wait_for 'EXIT=0' || fail "storm: Ctrl-D did not quit cleanly"
check_restored "after the storm"

# --- 1b. paced: the terminal loses its cells, then reports the size it had (SIGWINCH) ------------
if [ "$pace" != 0 ]; then
    run_app
    wait_for 'Send a message' || exit 1
    type_line "/pace 0.5"
    wait_for 'pace 0.5 tokens/s' 10 || fail "lost cells: /pace 0.5 not confirmed"
    type_line "In the beginning"
    wait_for 'generating [0-9]+' || fail "lost cells: the generation did not start"
    sleep 0.3
    # what a terminal's resize does to cells the application does not know about
    printf '\033[5;3HSTALE-CELL-1\033[25;70HSTALE-CELL-2' > "$(T display -p -t main '#{pane_tty}')"
    kill -WINCH "$(app_pid)"
    sleep 0.3
    screen | grep -q 'STALE-CELL' && fail "lost cells: a resize to the same size left stale cells"
    same_as_redraw "lost cells during a paced reply"
    T send-keys -t main C-c
    wait_for '\[stopped after [0-9]+ tokens\]' || fail "lost cells: Ctrl-C did not stop the reply"
    T send-keys -t main C-d
    wait_for 'EXIT=0' || fail "lost cells: Ctrl-D did not quit cleanly"
    check_restored "after lost cells"
fi

# --- 2. a 20x5 terminal: a notice, keys still work, a clean exit --------------------------------
T resize-window -t main -x 20 -y 5
run_app
wait_for 'too small' 20 || fail "20x5: no 'terminal too small' notice"
T send-keys -t main -l -- "/temp 0"
T send-keys -t main Enter
T resize-window -t main -x 100 -y 30
wait_for 'temp 0 \(' 10 || fail "20x5: a command typed while too small was lost"
coherent "after growing from 20x5"
T send-keys -t main C-d
wait_for 'EXIT=0' || fail "20x5: Ctrl-D did not quit cleanly"
check_restored "after 20x5"

# --- 3. no UTF-8 locale: ASCII only, bars as '#' ----------------------------------------------
run_app LANG=C LC_ALL=C
wait_for 'Send a message' || exit 1
type_line "/max 20"
type_line "In the beginning"
wait_for 'Step [0-9]+ .* token' || fail "LANG=C: no step in the histogram"
wait_for '[0-9.]+ tok/s' 20 || fail "LANG=C: the turn did not end"
if screen | LC_ALL=C grep -q '[^ -~]'; then
    fail "LANG=C: non-ASCII characters on screen"
    screen | LC_ALL=C grep -n '[^ -~]' | head -n 5 | sed 's/^/| /'
fi
screen | grep -qE '\|[ 0-9][0-9]> ' || fail "LANG=C: no '>' marks the drawn token"
screen | grep -qE '\| 1 .* ####' || fail "LANG=C: the first row has no '#' bar"
coherent "LANG=C"
T send-keys -t main C-d
wait_for 'EXIT=0' || fail "LANG=C: Ctrl-D did not quit cleanly"
check_restored "after LANG=C"

# --- 4. TERM=vt100: no colors, the same screen ------------------------------------------------
run_app TERM=vt100
wait_for 'Send a message' || exit 1
type_line "/max 20"
type_line "In the beginning"
wait_for '[0-9.]+ tok/s' 20 || fail "TERM=vt100: the turn did not end"
coherent "TERM=vt100"
type_line "/quit"
wait_for 'EXIT=0' || fail "TERM=vt100: /quit did not quit cleanly"
check_restored "after TERM=vt100"

# --- 5. TERM=dumb: line mode in the terminal, no screen drawing ------------------------------
wait_for '^\$ ?$' 10 >/dev/null || true
run_app TERM=dumb
wait_for '^>>> ?$' 20 || fail "TERM=dumb: no line-mode prompt"
type_line "/max 5"
wait_for 'max 5 new tokens' 20 || fail "TERM=dumb: no line-mode answer to /max"
type_line "In the beginning"
type_line "/quit"
wait_for 'EXIT=0' || fail "TERM=dumb: /quit did not quit cleanly"
screen | grep -qE 'Next token|Step [0-9]+ ' && fail "TERM=dumb: the full-screen UI was drawn"
[ "$(T display -p -t main '#{alternate_on}')" = 0 ] || fail "TERM=dumb: alternate screen on"
check_restored "after TERM=dumb"
done

finish
