#!/usr/bin/env bash
# column_hist_tmux.sh: the histogram pane beside the columns of /samples and /beam, in the real
# REPL at 100x30 inside a private tmux server: /samples show K puts column K's latest step in the
# pane (its label in the title, the drawn token marked) and switches with K, bad columns are
# refused naming the value, /samples show off gives the pane back to the columns, and /beam
# show K does the same for beam K.
# Every wait polls the screen with a deadline, so a loaded machine only makes it slower.
set -u
. "$(dirname "$0")/tmux.bash"

"$MKMODEL" "$work/model" --ctx 256 --seed 3 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
T -f /dev/null new-session -d -s main -x 100 -y 30 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
     TOKENTOP_HISTORY=$work/history $BIN --model $work/model --backend cpu --threads 1 --seed 7 \
     -n 12 --ignore-eos --pace 0"
T set-option -t main -g status off >/dev/null
wait_for 'Send a message' || exit 1

# --- 1. /samples 3: the columns cover the pane, as before
type_line "/samples 3"
wait_for '3 samples \(seeds 7\.\.9\)' 10 || fail "/samples 3: no confirmation"
type_line "In the beginning"
wait_for 'Enter closes the columns' 30 || fail "the samples did not finish"
check "without show the columns cover the histogram pane" \
    bash -c "! tmux -L '$sock' capture-pane -p -t main | grep -q '· step [0-9]* · token'"

# --- 2. /samples show K: column K's latest step in the pane, switching with K
type_line "/samples show 2"
check "/samples show 2 brings the columns back with column 2's last step in the pane" \
    wait_for '2: seed 8 · step 12 · token [0-9]+' 10
check "... the chain of that step: its entropy line and the drawn token's bar" \
    bash -c "s=\$(tmux -L '$sock' capture-pane -p -t main); echo \"\$s\" | grep -Eq 'H [0-9.]+→[0-9.]+ bits' &&
             echo \"\$s\" | grep -Eq '[0-9]+▶'"
check "... and the columns beside it" wait_for '3: seed 9' 5
type_line "/samples show 3"
check "/samples show 3 switches the pane to column 3" wait_for '3: seed 9 · step 12 · token' 10
check "... and column 2's is gone" \
    bash -c "! tmux -L '$sock' capture-pane -p -t main | grep -q '2: seed 8 · step'"

# --- 3. bad columns are refused, naming the value; the choice stays
type_line "/samples show 9"
wait_for '/samples show: "9" is not a column in \[1, 3\]' 10 || fail "/samples show 9: no message"
type_line "/samples show x"
wait_for '/samples show: "x" is not a column' 10 || fail "/samples show x: no message"
type_line "/samples show"
check "/samples show with no value names the column shown" \
    wait_for '/samples show: column 3' 10

# --- 4. /samples show off: the columns cover the pane again
type_line "/samples show off"
wait_for '3: seed 9' 10 || fail "/samples show off: the columns did not come back"
check "/samples show off gives the pane back to the columns" \
    bash -c "! tmux -L '$sock' capture-pane -p -t main | grep -q '· step [0-9]* · token'"

# --- 5. /beam show K: beam K's latest step (its own token scores, no draw)
T send-keys -t main Escape
type_line "/beam show 1"
wait_for '/beam show: the histogram pane shows' 10 || fail "/beam show 1: no message"
type_line "/beam 2"
wait_for 'beam search with 2 beams' 10 || fail "/beam 2: no confirmation"
type_line "And the earth"
wait_for 'Enter closes the columns' 30 || fail "the beam search did not finish"
check "/beam show 1 puts the best beam's last step in the pane" \
    wait_for 'beam 1, score -?[0-9.]+ · step [0-9]+ · token' 10
check "... saying the beam was not drawn" wait_for 'beam search: best summed scores go on' 5
type_line "/beam show 2"
check "/beam show 2 switches to the second beam" \
    wait_for 'beam 2, score -?[0-9.]+ · step [0-9]+ · token' 10
T send-keys -t main C-d
finish
