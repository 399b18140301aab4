# tmux.bash: what the tmux-driven e2e scripts share (sourced after nothing else, not run): on
# top of common.bash (build paths, $tmp, ok/fail/check/finish), private copies of the binaries
# in $work (= $tmp), a private tmux server (T), reading the pane (screen), polling waits with
# deadlines (wait_for, wait_gone), typing (type_line), the tokentop process in the pane (app_pid)
# and the check that the terminal was given back (check_restored, against $work/stty.before).
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
TIMEOUT=${E2E_TIMEOUT:-40}

command -v tmux >/dev/null || { echo "FAIL: tmux is not installed (tools/deps.sh installs it)"; exit 1; }
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
[ -x "$MKMODEL" ] || { echo "FAIL: $MKMODEL not built (make tools)"; exit 1; }
work=$tmp
# Private copies: a rebuild of the tree while the test runs must not pull the binary away.
cp "$BIN" "$work/tokentop" && cp "$MKMODEL" "$work/mkmodel" || { echo "FAIL: copy"; exit 1; }
BIN=$work/tokentop
MKMODEL=$work/mkmodel

sock="tokentop-e2e-$$"
T() { tmux -L "$sock" "$@"; }
# new_server: ends the private server (if any) and moves to a fresh socket for the next
# new-session. A server whose last session was killed exits asynchronously: a new-session on the
# same socket could reach it while it exits and fail with "server exited unexpectedly".
server_n=0
new_server() {
    T kill-server 2>/dev/null
    server_n=$((server_n + 1))
    sock="tokentop-e2e-$$-$server_n"
}
cleanup() {
    T kill-server 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

screen() { T capture-pane -p -t main; }

# A dead server (or pane) makes every later step fail: stop at once instead of timing out.
alive() {
    if ! T has-session -t main 2>/dev/null; then
        echo "FAIL: the tmux session is gone"
        exit 1
    fi
}

# wait_for PATTERN [SECONDS]: polls the pane until grep -E finds PATTERN.
wait_for() {
    local pattern=$1 limit=${2:-$TIMEOUT}
    local end=$((SECONDS + limit))
    while [ $SECONDS -lt $end ]; do
        if screen | grep -Eq -- "$pattern"; then
            return 0
        fi
        alive
        sleep 0.1
    done
    echo "--- timed out after ${limit}s waiting for: $pattern; the screen was:"
    screen | sed 's/^/| /'
    return 1
}

# wait_gone PATTERN [SECONDS]: polls until PATTERN is no longer on screen.
wait_gone() {
    local pattern=$1 limit=${2:-$TIMEOUT}
    local end=$((SECONDS + limit))
    while [ $SECONDS -lt $end ]; do
        screen | grep -Eq -- "$pattern" || return 0
        alive
        sleep 0.1
    done
    echo "--- timed out after ${limit}s waiting for this to go: $pattern"
    screen | sed 's/^/| /'
    return 1
}

type_line() {
    T send-keys -t main -l -- "$1"
    T send-keys -t main Enter
}

# The tokentop process running in the pane's shell.
app_pid() { pgrep -P "$(T display -p -t main '#{pane_pid}')" -f "$BIN" | head -1; }

# The terminal state tokentop must give back: tty modes, main screen, visible cursor.
check_restored() {
    local what=$1
    wait_for '^\$ ?$' 10 >/dev/null || true
    [ "$(T display -p -t main '#{alternate_on}')" = 0 ] || fail "$what: still on the alternate screen"
    [ "$(T display -p -t main '#{cursor_flag}')" = 1 ] || fail "$what: cursor left hidden"
    [ "$(T display -p -t main '#{keypad_cursor_flag}')" = 0 ] || fail "$what: keypad mode left on"
    rm -f "$work/stty.after"
    type_line "stty -g > $work/stty.after"
    local end=$((SECONDS + 10))
    while [ ! -s "$work/stty.after" ] && [ $SECONDS -lt $end ]; do sleep 0.1; done
    cmp -s "$work/stty.before" "$work/stty.after" \
        || fail "$what: tty modes not restored: $(cat "$work/stty.before") vs $(cat "$work/stty.after" 2>/dev/null)"
}

