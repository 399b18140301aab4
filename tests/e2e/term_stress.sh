#!/usr/bin/env bash
# term_stress.sh: the REPL in terminals that are hard to draw in, inside a private tmux server: a
# storm of 50 resizes in 2 seconds while a generation streams, a 20x5 terminal, no UTF-8 locale
# (LANG=C LC_ALL=C: every cell falls back to ASCII, bars included), TERM=vt100 and TERM=dumb
# (line mode). Each time the screen must be coherent afterwards (one status bar, one input line,
# the histogram's rows) and the terminal given back on exit.
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
    type_line "clear; env $* $BIN --model $work/model --backend cpu --seed 7 -n 1000000 --ignore-eos; echo EXIT=\$?"
}

# The screen holds one status bar, one input line and the histogram's header, and nothing else
# claims those rows.
coherent() {
    local what=$1 s
    s=$(screen)
    [ "$(grep -c '^>>> ' <<<"$s")" -eq 1 ] || fail "$what: not exactly one input line"
    [ "$(grep -cE 'KV [0-9]+/256' <<<"$s")" -eq 1 ] || fail "$what: not exactly one status bar"
    grep -qE 'Step [0-9]+ .* token|Next token' <<<"$s" || fail "$what: no histogram header"
    grep -q 'terminal too small' <<<"$s" && fail "$what: still says the terminal is too small"
    [ $fails -eq 0 ] || sed 's/^/| /' <<<"$s"
}

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
coherent "after the storm"
T send-keys -t main C-d
wait_for 'EXIT=0' || fail "storm: Ctrl-D did not quit cleanly"
check_restored "after the storm"

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

finish
