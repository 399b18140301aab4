#!/usr/bin/env bash
# repl_tmux.sh: the real REPL inside a private tmux server: type a prompt, change /temp and /topk
# and read the status bar and the histogram back with capture-pane, resize (also below the
# minimum), stop a generation with Ctrl-C, recall history, quit, and check that the terminal was
# restored (modes, alternate screen, cursor) after a normal exit, SIGTERM, SIGHUP and a crash
# signal.
# Every wait polls the screen with a deadline, so a loaded machine only makes it slower.
set -u
. "$(dirname "$0")/tmux.bash"

"$MKMODEL" "$work/model" --ctx 256 --seed 3 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }

# A plain shell in a private server; tokentop is started from it so its exit status and the
# terminal it leaves behind can be checked.
T -f /dev/null new-session -d -s main -x 120 -y 36 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
     TOKENTOP_HISTORY=$work/history HISTFILE=/dev/null PS1='\$ ' bash --norc --noprofile"
T set-option -t main -g status off >/dev/null
wait_for '^\$' 20 || exit 1
type_line "ulimit -c 0"   # the crash-signal case must not leave a core file behind
type_line "stty -g > $work/stty.before"
for _ in $(seq 100); do [ -s "$work/stty.before" ] && break; sleep 0.1; done

run_app() {
    type_line "$BIN --model $work/model --backend cpu --seed 7 -n 40 $*; echo EXIT=\$?"
}

# --- 1. start, first turn -----------------------------------------------------------------------
run_app
wait_for 'Send a message' || exit 1
wait_for 'KV 0/256' 5 || fail "status bar: no KV cache fill"
screen | grep -q 'Next token' || fail "no histogram pane"
type_line "In the beginning"
# (tokens/s replaces "generating N" when the turn is over)
wait_for '[0-9.]+ tok/s .*reused 0 prefilled [0-9]+' || fail "first turn: no reused/prefilled counts"
wait_for 'Step [0-9]+ · token' 5 || fail "first turn: histogram did not show a step"
screen | grep -q 'In the beginning' || fail "the prompt is not in the transcript"
screen | grep -Eq '[0-9.]+ tok/s' || fail "status bar: no tokens/s"
screen | grep -Eq 'ttft [0-9]+ ms' || fail "status bar: no time to first token"
screen | grep -Eq 'H [0-9.]+→[0-9.]+ bits' || fail "histogram: no entropy line"
screen | grep -q '▶' || fail "histogram: sampled token not marked"

# --- 2. /temp and /topk: confirmations, status bar, cut markers in the histogram ----------------
type_line "/temp 0.5"
wait_for 'temp 0.5 \(was 1\)' || fail "/temp: no confirmation"
wait_for ' temp 0.5 top-k 0 ' 5 || fail "/temp: status bar not updated"
type_line "/topk 3"
wait_for 'topk 3 \(was 0\)' || fail "/topk: no confirmation"
wait_for 'temp 0.5 top-k 3 ' 5 || fail "/topk: status bar not updated"
wait_for 'Next token at [0-9]+ \(not drawn\)' 10 || fail "/topk: histogram did not show the next-token view"
[ "$(screen | grep -cE '│ ?[ 0-9][0-9] .* top-k *$')" -ge 5 ] \
    || { fail "/topk 3: fewer than 5 rows marked as cut by top-k"; screen | sed 's/^/| /'; }
screen | grep -q 'kept 3 of' || fail "/topk 3: the histogram does not say 3 tokens were kept"
type_line "/t 1"
wait_for 'ambiguous command: /t, could be: /temp, /topk, /topp' || fail "ambiguous /t"
type_line "/x"
wait_for "Unknown command '/x'. Type /help." || fail "unknown /x"

# --- 3. a second turn reuses the cache -------------------------------------------------------------
type_line "And the earth"
wait_for 'tok/s .*reused [1-9][0-9]* prefilled [0-9]+' \
    || fail "second turn: no prompt tokens reused from the cache"

# --- 3b. step mode: one token per Enter, /pick replaces it; long notices arrive whole -------------
type_line "/step on"
wait_for 'step mode on' || fail "/step on"
type_line ""
wait_for 'Step 1 · token' || fail "step mode: Enter did not take one step"
type_line "/pick 2"
wait_for 'picked #2 ' || fail "/pick 2: no confirmation"
wait_for 'forced by /pick' 5 || fail "/pick 2: the histogram does not show the forced token"
type_line "/step off"
wait_for 'step mode off' || fail "/step off"
type_line "/help"
# /help is taller than the pane: it opens at its first line, grouped by task, with wrapped lines
# under their description column; PgDn goes on to its end.
wait_for '^Commands by task' || fail "/help did not open at its top"
wait_for 'more lines \(PgDn\)' 5 || fail "/help: no note of the lines below"
screen | grep -q '^sampler:' || fail "/help: no sampler group heading"
screen | grep -Eq '^ {23}[^ ]' || fail "/help: wrapped lines are not indented under the description"
for _ in 1 2 3 4 5 6; do T send-keys -t main NPage; done
wait_for 'underlined tokens were chosen with /pick' || fail "/help was cut short"

# --- 4. resize keeps the input line; too small shows a notice -------------------------------------
T send-keys -t main -l -- "half typed"
wait_for '>>> half typed' 5 || fail "typed text not shown"
T resize-window -t main -x 80 -y 30
wait_for '^─{20,}' || fail "narrow layout: no divider above the histogram"
screen | grep -q '>>> half typed' || fail "resize lost the input line"
T resize-window -t main -x 30 -y 8
wait_for 'terminal too small' || fail "no 'terminal too small' notice"
T resize-window -t main -x 120 -y 36
wait_for '>>> half typed' || fail "input line lost after growing back"
T send-keys -t main C-u
wait_gone 'half typed' 5 || fail "Ctrl-U did not clear the line"

# --- 5. Ctrl-C stops a long generation and keeps what was generated --------------------------------
type_line "/max 1000000"
wait_for 'max 1000000 new tokens' || fail "/max"
type_line "Go on"
wait_for 'generating [0-9]+' || fail "the long generation did not start"
T resize-window -t main -x 90 -y 30   # while generating: the layout follows at once
wait_for '^─{20,}' || fail "no re-layout while generating"
screen | grep -q 'generating [0-9]' || fail "the resize stopped the generation"
T send-keys -t main PPage   # scroll back while text streams in: the view holds
wait_for 'more lines and new text \(PgDn\)' 10 || fail "PageUp while generating"
T send-keys -t main NPage
wait_gone 'more lines' 10 || fail "PageDown did not return to the end"
T send-keys -t main C-c
wait_for '\[stopped after [0-9]+ tokens\]' || fail "Ctrl-C did not stop the generation"
wait_for 'Send a message' 10 || fail "no prompt after Ctrl-C"
screen | grep -q 'generating [0-9]' && fail "status still says generating"
T send-keys -t main -l -- "abc"
T resize-window -t main -x 100 -y 34   # also while idle after the interrupt
wait_for '>>> abc' 5 || fail "input after Ctrl-C not shown"
T send-keys -t main C-u

# --- 6. history ----------------------------------------------------------------------------------
T send-keys -t main Up
wait_for '>>> Go on' 5 || fail "Up did not recall the last entry"
T send-keys -t main Up
wait_for '>>> /max 1000000' 5 || fail "second Up did not recall the entry before"
T send-keys -t main Down Down
wait_for 'Send a message' 5 || fail "Down did not return to the empty line"

# --- 7. quit with Ctrl-D; the terminal comes back -------------------------------------------------
T send-keys -t main C-d
wait_for 'EXIT=0' || fail "Ctrl-D did not quit cleanly"
check_restored "after Ctrl-D"
grep -q '^In the beginning$' "$work/history" 2>/dev/null || fail "history file lacks the first prompt"
grep -q '^/temp 0.5$' "$work/history" 2>/dev/null || fail "history file lacks /temp 0.5"

# --- 8. Ctrl-C twice on an empty line quits -------------------------------------------------------
type_line "clear"
run_app
wait_for 'Send a message' || exit 1
T send-keys -t main C-c
wait_for 'press Ctrl-C again to quit' 10 || fail "first Ctrl-C: no hint"
T send-keys -t main C-c
wait_for 'EXIT=0' || fail "second Ctrl-C did not quit"
check_restored "after Ctrl-C twice"

# --- 9. SIGTERM, SIGHUP and a crash signal restore the terminal too ----------------------------------------
for sig in TERM HUP SEGV; do
    type_line "clear"
    run_app
    wait_for 'Send a message' || exit 1
    pid=$(app_pid)
    [ -n "$pid" ] || { fail "SIG$sig: cannot find the tokentop process"; continue; }
    kill -s "$sig" "$pid"
    case $sig in
        TERM) want=143 ;;
        HUP) want=129 ;;
        SEGV) want=139 ;;
    esac
    wait_for "EXIT=$want" || fail "SIG$sig: exit status is not $want"
    check_restored "after SIG$sig"
done

# --- 10. the terminal closes under `make run`: only make, the session leader, gets SIGHUP, and it
# waits for tokentop; the REPL must see its input hang up and leave, not spin on failed reads ---
printf 'run:\n\t%s --model %s --backend cpu --seed 7 -n 400 --ignore-eos\n' "$BIN" "$work/model" \
    >"$work/Makefile"
tmux -L "$sock-hup" -f /dev/null new-session -d -s hup -x 100 -y 30 "make -s -f $work/Makefile run"
for _ in $(seq 100); do
    tmux -L "$sock-hup" capture-pane -p -t hup 2>/dev/null | grep -q 'Send a message' && break
    sleep 0.1
done
tmux -L "$sock-hup" send-keys -t hup -l "In the beginning"
tmux -L "$sock-hup" send-keys -t hup Enter
sleep 0.3
tmux -L "$sock-hup" kill-server
left=1
for _ in $(seq 50); do
    pgrep -f "$work/Makefile run" >/dev/null || pgrep -f "$BIN --model $work/model" >/dev/null ||
        { left=0; break; }
    sleep 0.1
done
check "a REPL under make leaves within 5 s when its terminal closes mid-reply" test "$left" = 0
pkill -f "$BIN --model $work/model" 2>/dev/null
pkill -f "$work/Makefile run" 2>/dev/null

finish
