#!/usr/bin/env bash
# End-to-end checks of the batched drivers on a tiny random model: `generate --samples N --seed S`
# gives, for every sample i, exactly the per-token records of `generate --seed S+i` (through stop
# strings, --min-tokens, penalties and context shifts); `generate --num-beams` writes its ranked
# beams; bad values are refused with a message and nothing runs.
set -u
source "$(dirname "$0")/common.bash"

"$MKMODEL" "$tmp/m" --size tiny --seed 4 >/dev/null || { echo "FAIL mkmodel"; exit 1; }
M=(--model "$tmp/m" --threads 2 --backend cpu)

# The records of one sample, "sample":i removed: what the single run writes.
records_of() { grep "\"sample\":$2," "$1" | grep '"step"' | sed "s/\"sample\":$2,//"; }
singles() { grep '"step"' "$1"; }

# contract SETTINGS...: --samples 4 --seed 20 against --seed 20..23, record for record
contract() {
    local name=$1; shift
    "$BIN" generate "${M[@]}" "$@" --samples 4 --seed 20 --json > "$tmp/batch.jsonl" 2>"$tmp/err"
    local ok_all=1 i
    for i in 0 1 2 3; do
        "$BIN" generate "${M[@]}" "$@" --seed $((20 + i)) --json > "$tmp/one.jsonl" 2>>"$tmp/err"
        if ! diff <(records_of "$tmp/batch.jsonl" $i) <(singles "$tmp/one.jsonl") >/dev/null; then
            ok_all=0
            echo "  sample $i differs from --seed $((20 + i)) ($name)"
        fi
        [ -s "$tmp/one.jsonl" ] || ok_all=0
    done
    check "sample i of --samples 4 --seed 20 is the run --seed 20+i: $name" test $ok_all = 1
}
contract "sampling" -p "Hello there" -n 24 --temp 0.9 --top-p 0.95
contract "penalties, top-k, min-tokens" -p "a b a b" -n 20 --temp 1.3 --top-k 50 --repeat 1.3 \
    --presence 0.2 --min-tokens 5
contract "a stop string" -p "The" -n 30 --temp 1.5 --stop "e"
contract "context shifts" --ctx 16 -p "one two three four five" -n 40 --temp 1
contract "greedy" -p "x" -n 12 --greedy

"$BIN" generate "${M[@]}" -p "Hello" -n 6 --samples 3 --seed 1 --json > "$tmp/s.jsonl"
check "per-token records carry the sample" grep -q '^{"step":0,"sample":2,"id":' "$tmp/s.jsonl"
check "the summary lists every sample with its seed" \
    grep -q '"results":\[{"sample":0,"seed":1,.*{"sample":2,"seed":3,' "$tmp/s.jsonl"
"$BIN" generate "${M[@]}" -p "Hello" -n 6 --samples 2 --seed 1 -q > "$tmp/s.txt"
check "plain output lists the samples" grep -q -- '--- sample 1 (seed 2, max_tokens) ---' "$tmp/s.txt"

# --- beams
"$BIN" generate "${M[@]}" -p "Hello there" -n 8 --num-beams 4 --json > "$tmp/b.json"
check "--num-beams --json lists the beams" \
    grep -q '"num_beams":4,.*"beams":\[{"ids":\[.*\],"text":".*","logprob":.*,"score":' "$tmp/b.json"
check "all four beams are returned" test "$(grep -o '"ids":' "$tmp/b.json" | wc -l)" = 4
"$BIN" generate "${M[@]}" -p "Hello there" -n 8 --num-beams 4 --num-return 2 --json > "$tmp/b2.json"
check "--num-return 2 returns two" test "$(grep -o '"ids":' "$tmp/b2.json" | wc -l)" = 2
"$BIN" generate "${M[@]}" -p "Hello there" -n 8 --num-beams 4 --num-return 4 -q > "$tmp/b4.txt"
check "--num-return 4 prints the four beams, each under its rank and score" \
    test "$(grep -cE '^--- beam [1-4] of 4: score -?[0-9.]+, logprob -?[0-9.]+, [0-9]+ tokens ---$' "$tmp/b4.txt")" = 4
b1=$("$BIN" generate "${M[@]}" -p "Hello there" -n 8 --num-beams 1 --ignore-eos -q)
g=$("$BIN" generate "${M[@]}" -p "Hello there" -n 8 --greedy --ignore-eos -q)
check "one beam is greedy decoding" test "$b1" == "$g"

# --- bad input: a message naming the option and value, exit 2, nothing on stdout
bad() {
    local name=$1 want=$2; shift 2
    local out rc
    out=$("$BIN" generate "${M[@]}" -p "Hello" "$@" 2>"$tmp/err"); rc=$?
    if [ $rc -eq 2 ] && [ -z "$out" ] && grep -qF -- "$want" "$tmp/err"; then ok "$name"
    else fail "$name (rc $rc, stderr: $(cat "$tmp/err"))"; fi
}
bad "--num-beams 0 is refused" "--num-beams: '0' is not an integer in [1, 64]" --num-beams 0
bad "--num-beams 65 is refused" "--num-beams: '65' is not an integer in [1, 64]" --num-beams 65
bad "--num-beams abc is refused" "--num-beams: 'abc' is not an integer" --num-beams abc
bad "beams longer than the context are refused" \
    "exceed the context of 64 positions, and beams do not shift the context" --num-beams 3 -n 100
bad "--num-return above --num-beams is refused" "--num-return: 5 is more than the 4 beams" \
    --num-beams 4 --num-return 5
bad "--length-penalty nan is refused" "--length-penalty: 'nan' is not a number" \
    --num-beams 2 --length-penalty nan
bad "beam options without --num-beams are refused" "need --num-beams N" --early-stopping
bad "--samples 0 is refused" "--samples: '0' is not an integer in [1, 256]" --samples 0
bad "--samples 257 is refused" "--samples: '257' is not an integer in [1, 256]" --samples 257
bad "--samples with --num-beams is refused" "give either --num-beams or --samples" \
    --samples 2 --num-beams 2
bad "--stop with beams is refused" "--stop does not apply to beam search" --num-beams 2 --stop x

if [ $fails -gt 0 ]; then
    echo "batch.sh: $fails check(s) failed"
    exit 1
fi
echo "batch.sh: all checks passed"
