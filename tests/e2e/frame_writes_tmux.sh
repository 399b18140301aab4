#!/usr/bin/env bash
# frame_writes_tmux.sh: the terminal UI sends each frame to the terminal in one write. ncurses
# (6.4) wrote every cursor movement out at once until the program had been through endwin, so a
# frame went out in ~60 writes of 10-30 bytes, each waking the terminal (under tmux: the pty's
# kworker and the server) beside the decode it interrupts. A paced reply of 40 tokens draws about
# 40 frames: it must take a few writes a frame, not dozens. Needs strace (skipped without it).
# Every wait polls the screen with a deadline, so a loaded machine only makes it slower.
set -u
. "$(dirname "$0")/tmux.bash"

command -v strace >/dev/null || { echo "SKIPPED: strace is not installed (it counts the writes)"; exit 0; }
"$MKMODEL" "$work/model" --ctx 256 --seed 3 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
# strace itself may be refused (ptrace restricted in a container): then there is nothing to count
strace -o /dev/null true 2>/dev/null || { echo "SKIPPED: strace cannot trace here"; exit 0; }

T -f /dev/null new-session -d -s main -x 120 -y 34 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
     TOKENTOP_HISTORY=$work/history strace -e trace=write -e signal=none -o $work/writes \
     $BIN --model $work/model --backend cpu --threads 1 --seed 7 -n 40 --ignore-eos --pace 100"
T set-option -t main -g status off >/dev/null
wait_for 'Send a message' || exit 1
writes() { grep -c '^write(1,' "$work/writes"; }
before=$(writes)
type_line "In the beginning"
wait_for 'generating' 10 || fail "the turn did not start"
wait_for '[0-9.]+ tok/s' 30 || fail "the turn did not finish"
sleep 0.3   # the last frame
n=$(( $(writes) - before ))
check "a paced 40-token reply reaches the terminal in a few writes a frame ($n writes)" \
    test "$n" -ge 1 -a "$n" -le 200
T send-keys -t main C-d
finish
