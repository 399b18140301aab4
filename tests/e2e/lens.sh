#!/usr/bin/env bash
# lens.sh: the logit lens from the outside: generate --json --lens (the record's shape, the last
# layer's p of the drawn token is the record's raw p, refusals), the same on the emulated GPU
# plugin, /lens in line mode (the table as text), and in the terminal UI on the embedded model at
# 120x34 and 80x24: the table in the histogram's pane, following the steps of step mode, /lens
# while a reply streams (one line, the session goes on), /lens off.
set -u
. "$(dirname "$0")/tmux.bash"

"$MKMODEL" "$work/m" --ctx 64 --seed 5 >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
M=(--model "$work/m" --backend cpu --threads 1)
KJV=$PWD/models/kjv-target
export TOKENTOP_HISTORY=""

# near A B: two numbers within 1e-5
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5) }'; }

# lens_checks FILE WHAT: every line is JSON; each token record has a lens of 3 layers (mkmodel's
# 2 blocks and the embeddings) whose last p_chosen is the record's raw_p
lens_checks() {
    local f=$1 what=$2
    check "$what: every line is one JSON object" "$JSONCHECK" <"$f"
    local recs n_ok=0 n=0
    recs=$(grep -c '"id":[0-9]' "$f")
    while IFS= read -r line; do
        n=$((n + 1))
        local lens raw last layers
        lens=$(printf '%s\n' "$line" | "$JSONCHECK" --get lens)
        raw=$(printf '%s\n' "$line" | grep -oE '"raw_p":[0-9.e+-]+' | head -1 | cut -d: -f2)
        last=$(printf '%s\n' "$lens" | grep -oE '"p_chosen":[0-9.e+-]+' | tail -1 | cut -d: -f2)
        layers=$(printf '%s\n' "$lens" | grep -oE '\{"layer":[0-9]+' | cut -d: -f2 | tr '\n' ' ')
        [ "$layers" = "0 1 2 " ] && near "$last" "$raw" && n_ok=$((n_ok + 1))
    done < <(grep '"id":[0-9]' "$f")
    check "$what: $recs records, each with layers 0 1 2 ending at the record's raw p ($n_ok ok)" \
        test "$n_ok" -eq "$recs" -a "$recs" -gt 0
    head -1 "$f" | "$JSONCHECK" --get lens | grep -Eq '^\[\{"layer":0,"top":\[\{"id":[0-9]+,"token":"[^"]*","p":[0-9.e+-]+\}(,\{"id":[0-9]+,"token":"[^"]*","p":[0-9.e+-]+\}){4}\],"p_chosen":[0-9.e+-]+,"rank_chosen":[0-9]+,"entropy":[0-9.e+-]+\},' \
        || fail "$what: the lens entry's shape: $(head -1 "$f" | "$JSONCHECK" --get lens | head -c 300)"
}

# --- 1. generate --json --lens ------------------------------------------------------------------
"$BIN" generate "${M[@]}" -p "In the beginning" -n 5 --seed 3 --json --lens >"$work/j" 2>"$work/j.err"
check "generate --json --lens exits 0" test $? -eq 0
lens_checks "$work/j" "cpu"
"$BIN" generate "${M[@]}" -p "In" -n 2 --lens >/dev/null 2>"$work/e1"
check "--lens without --json is refused (exit 2)" test $? -eq 2
grep -q "^tokentop generate: --lens adds the logit lens to --json records" "$work/e1" || fail "message: $(cat "$work/e1")"
"$BIN" generate "${M[@]}" -p "In" -n 2 --json --lens --samples 2 >/dev/null 2>"$work/e2"
check "--lens with --samples is refused (exit 2)" test $? -eq 2
# the same tokens with and without --lens
"$BIN" generate "${M[@]}" -p "In the beginning" -n 5 --seed 3 --json >"$work/j0" 2>/dev/null
check "--lens changes no token" test "$(grep -o '"id":[0-9]*' "$work/j" | head -5)" = "$(grep -o '"id":[0-9]*' "$work/j0" | head -5)"

EMU_PLUGIN=$BUILD/gpu-emu/tokentop-cuda-emu.so
if [ -f "$EMU_PLUGIN" ]; then
    TOKENTOP_GPU_PLUGIN="$EMU_PLUGIN" "$BIN" generate --model "$work/m" --backend cuda -p "In the beginning" \
        -n 4 --seed 3 --json --lens >"$work/g" 2>"$work/g.err"
    check "generate --json --lens on the emulated GPU exits 0" test $? -eq 0
    lens_checks "$work/g" "cuda (emulated)"
else
    echo "     (skipped: the emulated GPU plugin $EMU_PLUGIN is not built)"
fi

# --- 2. line mode --------------------------------------------------------------------------------
printf '/lens\nIn the beginning\n/lens\n/lens sideways\n' | "$BIN" "${M[@]}" -n 4 --greedy >"$work/l.out" 2>"$work/l.err"
check "line mode with /lens exits 0" test $? -eq 0
grep -q "^/lens: no step on screen yet: type a prompt" "$work/l.err" || fail "/lens before a prompt: $(cat "$work/l.err")"
grep -Eq "^lens at token [0-9]+: the drawn .* \(p [0-9.]+% at the output\) (is|is not)" "$work/l.err" || fail "line mode: no summary"
grep -Eq "^Lens · step 4 · token [0-9]+$" "$work/l.err" || fail "line mode: no table title"
check "line mode: a row per layer (emb, 1, 2)" test "$(grep -cE '^(emb|  [12]) ' "$work/l.err")" -eq 3
grep -qx "/lens: 'sideways' is not off (usage: /lens \[off\])" "$work/l.err" || fail "bad argument: $(tail -2 "$work/l.err")"

# --- 3. the terminal UI on the embedded model --------------------------------------------------------
if [ -f "$KJV/model.safetensors" ]; then
    T -f /dev/null new-session -d -s main -x 120 -y 34 \
        "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color TOKENTOP_HISTORY= \
         $BIN --model $KJV --backend cpu --seed 42 -n 12 --pace 0"
    T set-option -t main -g status off >/dev/null
    wait_for 'Send a message' || exit 1
    type_line "In the beginning God created"
    wait_for 'Step 12 · token' || fail "no step histogram"
    type_line "/lens"
    wait_for '│Lens · step 12 · token [0-9]+' || fail "tui 120x34: no lens pane"
    screen | grep -Eq '│lyr top predictions .* rank$' || fail "tui: no header"
    check "tui 120x34: a row per layer (emb, 1 .. 6)" test "$(screen | grep -cE '│(emb|  [1-6]) ')" -eq 7
    screen | grep -Eq '│drawn: (top-1 from|p and rank by layer)' || fail "tui: no legend"
    screen | grep -Eq 'lens at token [0-9]+: the drawn' || fail "tui: no summary line"
    screen >"$work/screen120"; [ -n "${LENS_SCREEN:-}" ] && cp "$work/screen120" "$LENS_SCREEN"
    T resize-window -t main -x 80 -y 24
    wait_for '^Lens · step 12 · token [0-9]+' 5 || fail "tui 80x24: no lens pane below the transcript"
    check "tui 80x24: a row per layer" test "$(screen | grep -cE '^(emb|  [1-6]) ')" -eq 7
    screen | grep -Eq '^drawn: ' || fail "tui 80x24: the legend does not fit"
    screen >"$work/screen80"; [ -n "${LENS_SCREEN80:-}" ] && cp "$work/screen80" "$LENS_SCREEN80"
    # a slow reply: /lens while it streams gets one line after it, and the session goes on
    type_line "/pace 8"
    wait_for 'pace' 5 || fail "tui: /pace 8"
    type_line "And God said"
    sleep 0.3
    type_line "/lens"
    wait_for '/lens: not while generating \(Ctrl-C stops the generation\)' 20 || fail "tui: /lens while generating"
    wait_for '^Lens · step 12 · token [0-9]+' 10 || fail "tui: the lens did not follow the reply's last step"
    type_line "/pace 0"
    type_line "/step on"
    wait_for 'step mode' 5 || fail "tui: /step on"
    type_line "Let there be"
    wait_for '^Lens · next token at [0-9]+' 10 || fail "tui: step mode: no lens of the next token"
    T send-keys -t main Enter
    wait_for '^Lens · step 1 · token [0-9]+' 10 || fail "tui: step mode: the lens did not follow the step"
    T send-keys -t main Enter
    wait_for '^Lens · step 2 · token [0-9]+' 10 || fail "tui: step mode: the lens did not follow step 2"
    type_line "/lens off"
    wait_for 'lens off: the histogram is back' 5 || fail "tui: /lens off"
    wait_for 'H [0-9.]+→[0-9.]+ bits' 5 || fail "tui: the histogram did not come back"
    T send-keys -t main C-d
else
    echo "     (skipped: the embedded model $KJV is not there)"
fi
finish
