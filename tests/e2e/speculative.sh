#!/usr/bin/env bash
# End-to-end checks of speculative decoding through `tokentop generate --draft`: greedy output equal
# to plain greedy (also across a context shift, with stop strings and the adaptive gamma), the
# tokenizer check, per-token origins in --json and the summary's acceptance figures.
set -u
source "$(dirname "$0")/common.bash"

# A target, a draft that is its truncated copy (same seed, 1 block of 3), a model whose vocabulary
# differs. Small weights (--scale 0.3) make the copy agree with the target often.
"$MKMODEL" "$tmp/t" --vocab 300 --ctx 128 --embd 64 --heads 2 --layers 3 --seed 7 --scale 0.3 \
    >/dev/null || { echo "FAIL mkmodel"; exit 1; }
"$MKMODEL" "$tmp/d" --vocab 300 --ctx 128 --embd 64 --heads 2 --layers 1 --seed 7 --scale 0.3 \
    >/dev/null || { echo "FAIL mkmodel"; exit 1; }
"$MKMODEL" "$tmp/x" --vocab 310 --ctx 128 --embd 32 --heads 2 --layers 1 --seed 3 >/dev/null ||
    { echo "FAIL mkmodel"; exit 1; }
M=(--model "$tmp/t" --threads 1)

# --- greedy: the same tokens with and without the draft
plain=$("$BIN" generate "${M[@]}" -p "Hello there" -n 60 --greedy -q)
for g in 1 3 8; do
    spec=$("$BIN" generate "${M[@]}" --draft "$tmp/d" --gamma "$g" -p "Hello there" -n 60 \
           --greedy -q)
    check "greedy with --draft --gamma $g equals plain greedy" test "$spec" == "$plain"
done
spec=$("$BIN" generate "${M[@]}" --draft "$tmp/d" --gamma-adaptive -p "Hello there" -n 60 \
       --greedy -q)
check "greedy with --gamma-adaptive equals plain greedy" test "$spec" == "$plain"
plain_ctx=$("$BIN" generate "${M[@]}" --ctx 24 -p "Hello there" -n 70 --greedy -q)
spec_ctx=$("$BIN" generate "${M[@]}" --ctx 24 --draft "$tmp/d" --gamma 5 -p "Hello there" -n 70 \
           --greedy -q)
check "greedy across context shifts equals plain greedy" test "$spec_ctx" == "$plain_ctx"
a=$("$BIN" generate "${M[@]}" --ctx 24 --no-context-shift -p "Hello there" -n 70 --greedy -q)
b=$("$BIN" generate "${M[@]}" --ctx 24 --no-context-shift --draft "$tmp/d" --gamma 5 \
    -p "Hello there" -n 70 --greedy -q)
check "with shifting off, a speculative run stops where a plain one does" test "$a" == "$b"
stop=${plain:20:2}
if [ ${#stop} -eq 2 ]; then
    a=$("$BIN" generate "${M[@]}" -p "Hello there" -n 60 --greedy -q --stop "$stop")
    b=$("$BIN" generate "${M[@]}" --draft "$tmp/d" -p "Hello there" -n 60 --greedy -q \
        --stop "$stop")
    check "a stop string ends a speculative run where it ends a plain one" test "$a" == "$b"
fi

# --- sampling: a seed reproduces a speculative run whatever gamma, auto (which follows the
# measured times) included: the random numbers are keyed by position, not by round
s1=$("$BIN" generate "${M[@]}" --draft "$tmp/d" -p "Hi" -n 40 --seed 5 --temp 0.9 -q)
for i in 1 2 3; do
    s2=$("$BIN" generate "${M[@]}" --draft "$tmp/d" -p "Hi" -n 40 --seed 5 --temp 0.9 -q)
    check "same seed, gamma auto, same speculative text (run $i)" test "$s1" == "$s2"
done
for g in 1 2 5; do
    s2=$("$BIN" generate "${M[@]}" --draft "$tmp/d" --gamma "$g" -p "Hi" -n 40 --seed 5 \
         --temp 0.9 -q)
    check "same seed, gamma $g, the same text as gamma auto" test "$s1" == "$s2"
done
s2=$("$BIN" generate "${M[@]}" --draft "$tmp/d" -p "Hi" -n 40 --seed 6 --temp 0.9 -q)
check "another seed, another speculative text" test "$s1" != "$s2"

# --- the tokenizer check
if "$BIN" generate "${M[@]}" --draft "$tmp/x" -p "Hi" -n 4 -q >/dev/null 2>"$tmp/err"; then
    fail "a draft with another tokenizer is refused"
else
    check "a draft with another tokenizer is refused" grep -q "tokenizer differs" "$tmp/err"
fi

# --- JSON: origins and acceptance figures
"$BIN" generate "${M[@]}" --draft "$tmp/d" --gamma 4 -p "Hello" -n 40 --seed 2 --temp 1.2 \
    --ignore-eos --json > "$tmp/j" 2>"$tmp/err"
check "records and summary are JSON" "$JSONCHECK" --has done < "$tmp/j"
check "accepted drafts are marked" grep -q '"origin":"draft_accepted"' "$tmp/j"
check "rounds add no bonus token when the draft fits the context" \
    test "$(grep -c '"origin":"bonus"' "$tmp/j")" == 0
check "rejected drafts are marked, replacements follow" \
    grep -A1 -q '"origin":"draft_rejected"' "$tmp/j"
check "every rejection is followed by its replacement" test \
    "$(grep -c '"origin":"draft_rejected"' "$tmp/j")" == \
    "$(grep -c '"origin":"target_resample"' "$tmp/j")"
n_tok=$(grep '"step"' "$tmp/j" | grep -v '"draft_rejected"' | grep -vc '"flush":true')
check "one record per generated token besides rejections" test "$n_tok" == 40
for k in drafted accepted acceptance_rate tokens_per_target_pass; do
    check "summary has $k" grep -q "\"$k\":" "$tmp/j"
done
"$BIN" generate "${M[@]}" -p "Hello" -n 5 --json > "$tmp/jp"
check "plain runs have no speculative summary" test "$(grep -c '"drafted"' "$tmp/jp")" == 0

# --- the benchmark runs end to end (tiny models: the figures mean nothing, the plumbing does)
"$BIN" bench --model "$tmp/t" --draft "$tmp/d" --gamma 1..3 --gen-tokens 8 --reps 1 \
    --threads 1 --json > "$tmp/b" 2>"$tmp/err"
check "bench --draft --json writes one JSON object" "$JSONCHECK" < "$tmp/b"
for k in baseline_tok_s '"c"' acceptance_rate tokens_per_target_pass predicted_speedup; do
    check "bench reports $k" grep -q "$k" "$tmp/b"
done
check "bench has a row per gamma" test "$(grep -o '"gamma":' "$tmp/b" | wc -l)" == 3
if "$BIN" bench --model "$tmp/t" --draft "$tmp/x" --gamma 2 --gen-tokens 4 --reps 1 \
    >/dev/null 2>&1; then
    fail "bench refuses a draft with another tokenizer"
else
    ok "bench refuses a draft with another tokenizer"
fi

[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
