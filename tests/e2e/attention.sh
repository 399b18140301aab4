#!/usr/bin/env bash
# End-to-end checks of `generate --json --attention [avg|layers]` on the embedded model: every
# token record carries a valid list of the earlier tokens its step attended to (tools/jsoncheck
# --attention), one list per layer with `layers`, none without the option; a speculative greedy run
# gives each emitted token the attention plain greedy gives it; bad uses are refused in one line.
set -u
source "$(dirname "$0")/common.bash"

P="And God said, Let there be light: and there was light."
gen() { "$BIN" generate --threads 1 -p "$P" -n 12 --greedy --json "$@" 2>"$tmp/err"; }

gen --attention >"$tmp/avg"
check "every --attention record is valid JSON with a valid attention list" \
    "$JSONCHECK" --attention <"$tmp/avg"
check "the mean lists at most 8 positions" \
    bash -c "! grep -o '\"attention\":\[[^]]*\]' '$tmp/avg' | awk -F'\"pos\"' 'NF - 1 > 8' | grep -q ."
# the first step attends over the prompt only: every position it names is inside the prompt
n_prompt=$("$BIN" tokenize -p "$P" --json | tr -cd ',' | wc -c)
n_prompt=$((n_prompt + 1))
first_max=$(head -1 "$tmp/avg" | grep -o '"pos":[0-9]*' | cut -d: -f2 | sort -n | tail -1)
check "the first step attends to the prompt's $n_prompt tokens only (largest pos $first_max)" \
    test "$first_max" -lt "$n_prompt"
last_max=$(grep '"id":[0-9]' "$tmp/avg" | tail -1 | grep -o '"pos":[0-9]*' | cut -d: -f2 | sort -n | tail -1)
check "a later step also attends to generated tokens (largest pos $last_max)" \
    test "$last_max" -ge "$n_prompt"

gen --attention layers >"$tmp/layers"
check "attention_layers records are valid" "$JSONCHECK" --attention <"$tmp/layers"
layers=$(grep -o '"num_hidden_layers\|"n_layer": *[0-9]*' models/kjv-target/config.json | grep -o '[0-9]*$')
got=$(head -1 "$tmp/layers" | grep -o '"attention_layers":.*' | grep -o '\]' | wc -l)
check "one list per layer ($layers layers; $((got - 1)) lists)" test "$((got - 1))" -eq "$layers"

gen >"$tmp/none"
check "without --attention no record carries attention" bash -c "! grep -q attention '$tmp/none'"

# speculative greedy: the same tokens, and each emitted token's attention (the target's row of the
# verification span) is the row plain decoding computed, to the printed digits
gen --attention --draft models/kjv-draft --gamma 4 >"$tmp/spec"
check "speculative records are valid" "$JSONCHECK" --attention <"$tmp/spec"
emitted() { grep -v '"origin":"draft_rejected"' "$1" | grep '"id":[0-9]' |
            sed -E 's/.*"id":([0-9]+),.*("attention":\[[^]]*\]).*/\1 \2/'; }
emitted "$tmp/avg" >"$tmp/a.plain"
emitted "$tmp/spec" >"$tmp/a.spec"
check "speculative tokens and their attention equal plain greedy's" cmp -s "$tmp/a.plain" "$tmp/a.spec"
check "a speculative run had rounds" grep -q '"round":' "$tmp/spec"

# refusals: one line naming the option, exit status 2
"$BIN" generate -p x -n 2 --attention >/dev/null 2>"$tmp/e1"; rc=$?
check "--attention without --json is refused (exit $rc)" test "$rc" -eq 2
check "... in one line naming --attention" bash -c "[ \$(wc -l <'$tmp/e1') -eq 1 ] && grep -q -- --attention '$tmp/e1'"
"$BIN" generate -p x -n 2 --json --attention=heads >/dev/null 2>"$tmp/e2"; rc=$?
check "--attention=heads is refused (exit $rc)" test "$rc" -ne 0
check "... saying what it accepts" grep -q "not avg or layers" "$tmp/e2"
"$BIN" generate -p x -n 2 --json --attention --samples 2 >/dev/null 2>"$tmp/e3"; rc=$?
check "--attention with --samples is refused (exit $rc)" test "$rc" -eq 2
finish
