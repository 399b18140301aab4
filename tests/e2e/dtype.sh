#!/usr/bin/env bash
# dtype.sh: the weight precision at run time: /dtype in line mode (the conversation goes on as a
# fresh engine at the new precision would go on from the same tokens; bad input keeps
# everything), /dtype compare as text, generate --json --compare-dtype (the record's shape), a
# backend without q8 (the emulated GPU plugin), and the two-precision view in the real terminal
# UI at 100x30 and 60x24 (tmux).
set -u
. "$(dirname "$0")/tmux.bash"

"$MKMODEL" "$work/m" --ctx 128 --seed 5 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
M=(--model "$work/m" --backend cpu --threads 1)
export TOKENTOP_HISTORY=""

# --- 1. line mode: switch, continue, compare ---------------------------------------------------
printf 'In the beginning\n/save %s\n/dtype q8\n\n/show\n/dtype fp8\n/dtype compare bf16\n/dtype compare off\n' \
    "$work/conv.json" | "$BIN" "${M[@]}" -n 6 --greedy >"$work/a.out" 2>"$work/a.err"
check "line mode with /dtype exits 0" test $? -eq 0
grep -q "^weights now q8 (were fp32): cpu: .*q8 weights; the conversation's [0-9]* tokens were prefilled again" "$work/a.err" \
    || fail "/dtype q8: no confirmation: $(cat "$work/a.err")"
grep -q "^precision   q8 weights" "$work/a.err" || fail "/show does not report q8"
grep -qx "/dtype: 'fp8' is not fp32, fp16, bf16 or q8 (kept q8)" "$work/a.err" || fail "/dtype fp8: no clear refusal"
grep -q "^next token at [0-9]*, raw p: q8 vs bf16" "$work/a.err" || fail "/dtype compare: no table"
grep -Eq "^KL\(q8‖bf16\) [0-9.e+-]+ nats · max \|Δp\| [0-9.]+% at " "$work/a.err" || fail "/dtype compare: no KL line"
grep -Eq "^top-1 (agrees|differs)" "$work/a.err" || fail "/dtype compare: no top-1 line"
grep -q "^comparison off: the second engine's [0-9.]* MiB are freed" "$work/a.err" || fail "/dtype compare off"
printf 'In the beginning\n/dtype compare\n' | "$BIN" "${M[@]}" -n 3 --greedy --compare-dtype q8 >/dev/null 2>"$work/s.err"
grep -q "^next token at [0-9]*, raw p: fp32 vs q8" "$work/s.err" || fail "--compare-dtype q8 did not start the REPL comparing: $(cat "$work/s.err")"
"$BIN" "${M[@]}" --compare-dtype fp32 </dev/null >/dev/null 2>"$work/s2.err"
check "the REPL refuses --compare-dtype of its own precision (exit 1)" test $? -eq 1
grep -q "^tokentop: --compare-dtype: /dtype compare fp32: the weights are fp32 already" "$work/s2.err" || fail "message: $(cat "$work/s2.err")"
# The reply after the switch is what a fresh q8 engine gives on the same tokens.
printf '/load %s\n\n' "$work/conv.json" | "$BIN" "${M[@]}" -n 6 --greedy --dtype q8 >"$work/b.out" 2>"$work/b.err"
check "after /dtype q8 the conversation goes on as a fresh q8 engine's" \
    test "$(sed -n 2p "$work/a.out")" = "$(sed -n 1p "$work/b.out")"
check "the reply after the switch is not empty" test -n "$(sed -n 2p "$work/a.out")"

# --- 2. generate --json --compare-dtype ---------------------------------------------------------
"$BIN" generate "${M[@]}" -p "In the beginning" -n 4 --greedy --json --compare-dtype q8 >"$work/j" 2>"$work/j.err"
check "generate --compare-dtype exits 0" test $? -eq 0
check "every line is one JSON object" "$JSONCHECK" <"$work/j"
head -1 "$work/j" | "$JSONCHECK" --get compare >"$work/jc" 2>&1 || fail "a record has no compare object"
grep -Eq '^\{"dtype":"q8","raw_p":[0-9.e-]+,"kl":[0-9.e-]+,"max_dp":[0-9.e-]+,"max_dp_id":[0-9]+,"top1":\{"id":[0-9]+,"raw_p":[0-9.e-]+\},"top1_agree":(true|false),"top":\[\{"id":[0-9]+,"raw_p":' "$work/jc" \
    || fail "the compare object's shape: $(head -c 300 "$work/jc")"
n_top=$(head -1 "$work/j" | "$JSONCHECK" --get top | grep -o '"id":' | wc -l)
n_cmp=$(grep -o '"id":' "$work/jc" | wc -l)
check "compare.top lists the record's top tokens (plus top1)" test "$n_cmp" -eq $((n_top + 1))
tail -1 "$work/j" | "$JSONCHECK" --get compare 2>&1 | grep -Eq '^\{"dtype":"q8","positions":4,"top1_agreement":[0-9.]+,"mean_kl":' \
    || fail "the summary has no compare totals: $(tail -1 "$work/j")"
"$BIN" generate "${M[@]}" -p "In" -n 2 --compare-dtype q8 >/dev/null 2>"$work/t.err"
grep -Eq '^\[compared with q8: 2 positions \| top-1 agreement [0-9.]+% \| mean KL ' "$work/t.err" || fail "no text summary: $(cat "$work/t.err")"
"$BIN" generate "${M[@]}" -p "In" --compare-dtype fp8 >/dev/null 2>"$work/e1"
check "--compare-dtype fp8 is refused (exit 2)" test $? -eq 2
grep -qx "tokentop generate: --compare-dtype: 'fp8' is not fp32, fp16, bf16 or q8" "$work/e1" || fail "fp8 message: $(cat "$work/e1")"
"$BIN" generate "${M[@]}" -p "In" --compare-dtype fp32 >/dev/null 2>"$work/e2"
check "--compare-dtype of the engine's own precision is refused" grep -q "the engine holds fp32 weights already" "$work/e2"
"$BIN" generate "${M[@]}" -p "In" --samples 2 --compare-dtype q8 >/dev/null 2>"$work/e3"
check "--compare-dtype with --samples is refused" grep -q "compares plain generation" "$work/e3"

# --- 3. a backend without q8: the emulated GPU plugin --------------------------------------------
EMU_PLUGIN=$BUILD/gpu-emu/tokentop-cuda-emu.so
if [ -f "$EMU_PLUGIN" ]; then
    printf 'In the beginning\n/dtype q8\n/dtype compare q8\n/dtype fp16\n\n/show\n' | \
        TOKENTOP_GPU_PLUGIN="$EMU_PLUGIN" "$BIN" --model "$work/m" --backend cuda -n 4 --greedy \
        >"$work/c.out" 2>"$work/c.err"
    grep -q "^/dtype q8: cuda: --dtype q8 runs on the CPU only .* (kept fp32)$" "$work/c.err" \
        || fail "cuda /dtype q8: no clear refusal: $(cat "$work/c.err")"
    grep -q "^/dtype compare q8: cuda: --dtype q8 runs on the CPU only" "$work/c.err" || fail "cuda /dtype compare q8"
    grep -q "^weights now fp16 (were fp32): cuda" "$work/c.err" || fail "cuda /dtype fp16 did not switch"
    check "the conversation goes on after the refusal (two replies)" test "$(grep -c . "$work/c.out")" -eq 2
    grep -q "^precision   fp16 weights" "$work/c.err" || fail "cuda /show: not fp16"
else
    echo "     (skipped: the emulated GPU plugin $EMU_PLUGIN is not built)"
fi

# --- 4. the terminal UI at 100x30, then 60x24 ------------------------------------------------------
# (unpaced: the commands below are typed right after a reply and must not find it still streaming)
T -f /dev/null new-session -d -s main -x 100 -y 30 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color TOKENTOP_HISTORY= \
     $BIN --model $work/m --backend cpu --threads 1 --seed 3 -n 8 --greedy --pace 0"
T set-option -t main -g status off >/dev/null
wait_for 'Send a message' || exit 1
type_line "In the beginning"
wait_for 'Step 8 · token' || fail "no step histogram"
type_line "/dtype q8"
wait_for 'weights now q8 \(were fp32\)' || fail "tui: /dtype q8"
wait_for '│ cpu q8 │' 5 || fail "tui: the status bar does not show q8"
type_line "/dtype compare fp32"
wait_for 'Next token at [0-9]+ · q8 vs fp32' || fail "tui: no two-precision view"
screen | grep -Eq 'KL [0-9.e+-]+ nats · max\|Δp\|' || fail "tui: no KL line in the pane"
screen | grep -Eq 'top-1 (agrees|differs)' || fail "tui: no top-1 line"
screen | grep -Eq '│ cpu q8 vs fp32 │' || fail "tui: the status bar does not show the pair"
screen | grep -Eq '^.*│ 1  .* [0-9 .]+% .* [0-9 .]+% ' || fail "tui: no paired row"
T send-keys -t main Enter
wait_for 'Step [0-9]+ · token [0-9]+ · q8 vs fp32' || fail "tui: the view does not follow the steps"
screen >"$work/screen100"; [ -n "${DTYPE_SCREEN:-}" ] && cp "$work/screen100" "$DTYPE_SCREEN"
T resize-window -t main -x 60 -y 24
wait_for '^Step [0-9]+ · token [0-9]+ · q8 vs fp32' 5 || fail "tui 60x24: no two-precision view below the transcript"
screen | grep -Eq '^ 1.* [0-9 .]+% .* [0-9 .]+% ' || fail "tui 60x24: no paired row"
screen | grep -Eq 'top-1 (agrees|differs)' || fail "tui 60x24: no top-1 line"
type_line "/dtype compare off"
wait_for 'comparison off' || fail "tui: compare off"
wait_for 'H [0-9.]+→[0-9.]+ bits' 5 || fail "tui: the sampler view did not come back"
T send-keys -t main C-d
finish
