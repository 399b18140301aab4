#!/usr/bin/env bash
# linemode.sh: the REPL without a terminal (stdin/stdout piped, TERM=dumb): prompts from stdin,
# generated text to stdout, slash-commands on stderr. Outputs are compared with `tokentop
# generate` on the same model and with the expected command messages.
set -u
source "$(dirname "$0")/common.bash"
work=$tmp

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
[ -x "$MKMODEL" ] || { echo "FAIL: $MKMODEL not built (make tools)"; exit 1; }
# Private copies: a rebuild of the tree while the test runs must not pull the binary away.
cp "$BIN" "$work/tokentop" && cp "$MKMODEL" "$work/mkmodel" || { echo "FAIL: copy"; exit 1; }
BIN=$work/tokentop
MKMODEL=$work/mkmodel
"$MKMODEL" "$work/m" --ctx 128 --seed 5 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
M=$work/m
export TOKENTOP_HISTORY=""
# --backend cpu everywhere: the comparisons below are about line mode, not the backend chosen;
# the plugin's absence is reported only where a person looks (status bar, /show, -v).

# 1. A greedy reply in line mode is what `generate` prints for the same prompt (both end the
#    line).
printf '/temp 0\nHello\n' | "$BIN" --backend cpu --model "$M" -n 12 >"$work/out1" 2>"$work/err1"
rc=$?
[ $rc -eq 0 ] || fail "line mode exited with $rc: $(cat "$work/err1")"
"$BIN" generate --backend cpu --model "$M" -p Hello --temp 0 -n 12 -q >"$work/gen1"
cmp -s "$work/out1" "$work/gen1" || fail "line mode reply differs from generate: $(od -c "$work/out1" | head -3) vs $(od -c "$work/gen1" | head -3)"
grep -qx 'temp 0 (0: greedy, always the most likely token) (was 1)' "$work/err1" \
    || fail "no /temp confirmation on stderr: $(cat "$work/err1")"

# 2. Command messages: confirmations, errors with the old value kept, lookup messages, and the
#    stop strings, all on stderr; stdout holds only replies (none here).
cat >"$work/script2" <<'EOF'
/topk 40
/topk -x
/t 1
/x
/te 0.5
/max 0
/max 7
/stop \n\n
/stop
/order llama
/spec on
/quit
Never sent
EOF
"$BIN" --backend cpu --model "$M" --seed 1 <"$work/script2" >"$work/out2" 2>"$work/err2"
cat >"$work/want2" <<'EOF'
topk 40 (was 0)
/topk: "-x" is not an integer (kept 40)
ambiguous command: /t, could be: /temp, /topk, /topp
Unknown command '/x'. Type /help.
temp 0.5 (was 1)
/max: "0" is not an integer in [1, 16777216] (kept 128)
max 7 new tokens per turn (was 128)
stop string added: "\n\n" (1 in all)
stop strings: "\n\n"
order llama: penalties, top-k, top-p, min-p, then temperature (was hf)
EOF
head -n 10 "$work/err2" >"$work/got2"
diff -u "$work/want2" "$work/got2" >"$work/diff2" || fail "command messages differ: $(cat "$work/diff2")"
grep -q "speculative" "$work/err2" || fail "/spec gave no message"
[ -s "$work/out2" ] && fail "stdout should be empty after /quit: $(cat "$work/out2")"

# 3. A seed reproduces a sampled reply; /regen under greedy repeats it; /undo forgets a turn.
printf 'Once\n' | "$BIN" --backend cpu --model "$M" --seed 11 -n 10 >"$work/a" 2>/dev/null
printf 'Once\n' | "$BIN" --backend cpu --model "$M" --seed 11 -n 10 >"$work/b" 2>/dev/null
cmp -s "$work/a" "$work/b" || fail "the same seed gave different replies"
printf '/greedy\nOnce\n/regen\n' | "$BIN" --backend cpu --model "$M" -n 10 >"$work/c" 2>"$work/cerr"
first=$(head -c "$(( $(wc -c <"$work/c") / 2 ))" "$work/c")
second=$(tail -c "$(( $(wc -c <"$work/c") / 2 ))" "$work/c")
[ "$first" = "$second" ] || fail "/regen under greedy changed the reply"
grep -q "regenerating the last reply" "$work/cerr" || fail "no /regen message: $(cat "$work/cerr")"
printf '/greedy\nOnce\n/undo\nOnce\n' | "$BIN" --backend cpu --model "$M" -n 10 >"$work/d" 2>"$work/derr"
cmp -s "$work/c" "$work/d" || fail "/undo then the same prompt gave a different reply"
grep -q "dropped .* (the last turn)" "$work/derr" || fail "no /undo message: $(cat "$work/derr")"

# 4. A """ block is one prompt; an empty line continues; TERM=dumb on a pipe is line mode too.
printf '/greedy\n"""Line one\nline two"""\n' | TERM=dumb "$BIN" --backend cpu --model "$M" -n 5 >"$work/e" 2>"$work/eerr"
[ $? -eq 0 ] || fail "multi-line prompt failed: $(cat "$work/eerr")"
"$BIN" generate --backend cpu --model "$M" -p "$(printf 'Line one\nline two')" --temp 0 -n 5 -q >"$work/egen"
cmp -s "$work/e" "$work/egen" || fail "the \"\"\" block was not sent as one prompt"

# 4b. /load of the example session (text only: any model) applies its settings.
printf '/load prompts/session-example.json\n/show\n' | "$BIN" --backend cpu --model "$M" >/dev/null 2>"$work/lerr"
grep -q "^loaded prompts/session-example.json: [0-9]* tokens in 1 turn;" "$work/lerr" \
    || fail "/load of the example session: $(cat "$work/lerr")"
grep -q "temp 0.8 top-k 40 top-p 0.95" "$work/lerr" || fail "/load did not apply the settings"
grep -q 'stop strings: "\\n\\n"' "$work/lerr" || fail "/load did not apply the stop string"

# 5. The scripted tour in prompts/ runs clean.
"$BIN" --backend cpu --model "$M" --seed 3 -n 8 <prompts/sampling-tour.txt >"$work/tour" 2>"$work/tourerr"
rc=$?
[ $rc -eq 0 ] || fail "prompts/sampling-tour.txt exited with $rc"
grep -qi "error\|unknown command\|ambiguous" "$work/tourerr" && fail "the tour hit an error: $(cat "$work/tourerr")"
[ "$(grep -c . "$work/tourerr")" -ge 5 ] || fail "the tour printed too few confirmations"

finish
