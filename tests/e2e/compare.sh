#!/usr/bin/env bash
# compare.sh: /beam, /samples, /compare and /keep in the REPL. Line mode: the columns printed as
# text, sample i equal to `tokentop generate --seed S+i`, the best beam equal to `generate
# --num-beams`, /keep, bad values refused with the value named, prompts/degeneration.txt. Then
# the real terminal UI in a private tmux server: the ranking of /beam, the columns of /compare
# side by side at 100 columns and stacked at 50, /keep making a column the reply, bad input, a
# terminal shrunk below the minimum and grown back while the columns are up, and keys typed
# during a run handled after it.
set -u
. "$(dirname "$0")/tmux.bash"

export TOKENTOP_HISTORY=""
P="And the LORD said unto Moses,"

# --- 1. line mode ------------------------------------------------------------------------------
printf '/samples 2\n%s\n/keep 2\n/ids 1\n' "$P" \
    | "$BIN" --backend cpu --seed 7 -n 12 >"$work/s.out" 2>"$work/s.err"
"$BIN" generate --backend cpu -p "$P" --seed 8 -n 12 -q >"$work/g8.out"
sed -n '/^=== 2: seed 8 /,/^===/p' "$work/s.out" | sed '1d;/^===/d' >"$work/s2.out"
cmp -s "$work/s2.out" "$work/g8.out" \
    && ok "line mode: sample 2 of /samples 2 at seed 7 is generate --seed 8" \
    || fail "sample 2 differs from generate --seed 8: $(cat "$work/s2.out") vs $(cat "$work/g8.out")"
grep -Eq '^=== 1: seed 7 \| 12 tokens, max_tokens \| mean logprob -[0-9.]+ \| distinct-2 [0-9.]+ \| repeated 3-grams [0-9]+' "$work/s.out" \
    && ok "line mode: a column header carries its figures" || fail "no figures: $(head -3 "$work/s.out")"
grep -q 'kept 2: seed 8 (12 tokens) as the reply' "$work/s.err" \
    && ok "line mode: /keep 2" || fail "/keep 2: $(cat "$work/s.err")"

printf '/beam 3\n%s\n' "$P" | "$BIN" --backend cpu -n 12 >"$work/b.out" 2>"$work/b.err"
"$BIN" generate --backend cpu -p "$P" --num-beams 3 -n 12 -q >"$work/gb.out"
sed -n '/^=== beam 1,/,/^===/p' "$work/b.out" | sed '1d;/^===/d' >"$work/b1.out"
cmp -s "$work/b1.out" "$work/gb.out" \
    && ok "line mode: the best beam of /beam 3 is generate --num-beams 3" \
    || fail "best beam differs: $(cat "$work/b1.out") vs $(cat "$work/gb.out")"
[ "$(grep -c '^=== beam ' "$work/b.out")" -eq 3 ] && grep -q '| the reply$' "$work/b.out" \
    && ok "line mode: the ranking of 3 beams, the first the reply" || fail "beam ranking: $(cat "$work/b.out")"

printf '/beam 0\n/samples 99\n/compare temperature2 1\n/compare topp 0.5 7\n/ids\n' \
    | "$BIN" --backend cpu -n 8 >"$work/bad.out" 2>"$work/bad.err"
for want in '/beam: "0" is not a number of beams in \[1, 16\] \(or off\): the screen shows at most 16 rows; generate --num-beams takes up to 64' \
            '/samples: "99" is not a number of samples in \[1, 8\] \(or off\): the screen shows at most 8 columns; generate --samples takes up to 256' \
            '/compare: unknown setting "temperature2"' \
            '/compare topp: value "7": top_p: 7 is outside \[0, 1\]' \
            'the conversation is empty'; do
    grep -Eq -- "$want" "$work/bad.err" && ok "line mode refuses: $want" \
        || fail "no message matching $want in: $(cat "$work/bad.err")"
done
[ ! -s "$work/bad.out" ] || fail "bad input produced output: $(cat "$work/bad.out")"

# the degeneration demo script runs as documented: 3 + 4 + 3 + 3 columns, nothing refused
"$BIN" --backend cpu <"$(dirname "$0")/../../prompts/degeneration.txt" >"$work/d.out" 2>"$work/d.err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '^=== ' "$work/d.out")" -eq 13 ] && ! grep -qi 'error\|not a\|unknown' "$work/d.err" \
    && ok "prompts/degeneration.txt runs in line mode" \
    || fail "prompts/degeneration.txt: rc $rc, $(grep -c '^=== ' "$work/d.out") columns: $(head -5 "$work/d.err")"

# --- 2. the terminal UI --------------------------------------------------------------------------
T -f /dev/null new-session -d -s main -x 100 -y 30 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color TOKENTOP_HISTORY= \
     $BIN --backend cpu --seed 7 -n 24; echo EXIT=\$?; sleep 30"
T set-option -t main -g status off >/dev/null
wait_for 'Send a message' 20 || exit 1

type_line "/beam 3"
wait_for 'next line: beam search with 3 beams' 10 || fail "/beam 3: the input line does not say what is armed"
type_line "$P"
wait_for 'beam search: 3 beams, [0-9]+ steps' || fail "/beam: no ranking heading"
screen | grep -Eq 'beam 1, score -[0-9.]+ +│beam 2, score' || fail "/beam: the beams are not side by side"
screen | grep -Eq 'lp -[0-9.]+ d2 [0-9.]+ rep3 [0-9]+' && ok "/beam: ranking with figures" || fail "/beam: no figures"
T send-keys -t main Enter
wait_for 'beam 1: score -[0-9.]+ \| logprob' 10 && ok "/beam: Enter closes the board; the ranking is in the transcript" \
    || fail "/beam: ranking note"
screen | grep -q 'Next token at' || fail "/beam: no next-token view after the kept beam"

type_line "/compare temp 0 0.8 1.5"
wait_for 'next line: /compare temp over 3 values' 10 || fail "/compare: not armed"
type_line "And God said"
wait_for '1: temp 0 .*│2: temp 0.8 .*│3: temp 1.5' && ok "/compare: three columns side by side at 100 columns" \
    || fail "/compare: columns"
T resize-window -t main -x 50 -y 24
wait_for '^3: temp 1.5  lp ' 10 && ok "/compare: stacked at 50 columns" || fail "/compare: not stacked when narrow"
T resize-window -t main -x 30 -y 8
wait_for 'too small' 10 && ok "a tiny terminal shows the notice with the columns up" || fail "tiny terminal"
T resize-window -t main -x 100 -y 30
wait_for '1: temp 0 .*│2: temp 0.8' 10 && ok "the columns come back when it grows" || fail "grow back"
type_line "/keep 2"
wait_for 'kept 2: temp 0.8 \([0-9]+ tokens\) as the reply' 10 && ok "/keep 2" || fail "/keep 2"
type_line "/keep 9"
wait_for '/keep: "9" is not a column of the last /compare' 10 && ok "/keep 9 refused" || fail "/keep 9"
type_line "/compare topp 0.5 1.5"
wait_for '/compare topp: value "1.5": top_p: 1.5 is outside' 10 \
    && ok "/compare with a bad value refused" || fail "/compare bad value"
type_line "/samples 2"
type_line "In the beginning"
wait_for '1: seed 7 .*│2: seed 8' && ok "/samples 2: columns with seeds 7 and 8" || fail "/samples 2"
wait_for 'lp -[0-9.]+ d2 [0-9.]+ rep3 [0-9]+ +│lp -' 20 || fail "/samples 2: no figures"
# keys typed while a run goes on (8 samples of 200 tokens) are held and handled afterwards
type_line "/max 200"
type_line "/samples 8"
type_line "And"
type_line "/quit"
wait_for 'EXIT=0' 60 && ok "/quit typed during /samples 8 quits once they are done" || fail "exit status"
finish
