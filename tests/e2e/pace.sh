#!/usr/bin/env bash
# End-to-end checks of pacing (--pace N, /pace N): a paced reply takes about (tokens - 1) / N
# seconds (loose bounds: the machine may be busy), the reported decode speed stays the engine's,
# an unpaced one is fast, bad values are refused with the value named, and speculative runs are
# paced too.
set -u
source "$(dirname "$0")/common.bash"

# a target and a draft that is its truncated copy (pacing does not care how well they agree)
for layers in 3 1; do
    "$MKMODEL" "$tmp/m$layers" --vocab 300 --ctx 128 --embd 64 --heads 2 --layers "$layers" \
        --seed 7 >/dev/null || { echo "FAIL mkmodel"; exit 1; }
done
M=(--model "$tmp/m3" --threads 1)
now() { date +%s.%N; }
# elapsed START: seconds since START, as a decimal
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
between() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x + 0 >= lo && x + 0 <= hi) }'; }

# --- generate --pace: 21 tokens at 20/s are 20 slots of 50 ms after the first
t0=$(now)
"$BIN" generate "${M[@]}" -p "Hello" -n 21 --ignore-eos --greedy --pace 20 >/dev/null 2>"$tmp/sum"
dt=$(elapsed "$t0")
check "generate --pace 20: 21 tokens take about 1 s (took $dt s)" between "$dt" 0.95 6
tok_s=$(sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$tmp/sum")
check "the summary's decode speed is the engine's ($tok_s tok/s), not the pace" \
    between "${tok_s:-0}" 60 1e9
t0=$(now)
"$BIN" generate "${M[@]}" -p "Hello" -n 21 --ignore-eos --greedy --pace 0 >/dev/null 2>&1
dt=$(elapsed "$t0")
check "generate --pace 0 is not held back (took $dt s)" between "$dt" 0 0.9
"$BIN" generate "${M[@]}" -p "Hello" -n 21 --ignore-eos --greedy --json --pace 20 >"$tmp/j" \
    2>/dev/null
check "--json with --pace still writes JSON" "$JSONCHECK" --has done <"$tmp/j"
jtok_s=$(tail -1 "$tmp/j" | sed -n 's/.*"decode_tok_s":\([0-9.]*\).*/\1/p')
check "--json's decode_tok_s is the engine's ($jtok_s)" between "${jtok_s:-0}" 60 1e9

# --- speculative rounds are paced token by token
t0=$(now)
"$BIN" generate "${M[@]}" --draft "$tmp/m1" -p "Hello" -n 21 --ignore-eos --greedy --pace 20 \
    >/dev/null 2>"$tmp/sum"
dt=$(elapsed "$t0")
check "speculative --pace 20: 21 tokens take about 1 s (took $dt s)" between "$dt" 0.95 6
check "speculative summary says how gamma was chosen" grep -q "gamma [0-9]* (auto)" "$tmp/sum"

# --- bad values
for v in -1 abc 1e9 5x ''; do
    if "$BIN" generate "${M[@]}" -p "Hi" -n 2 --pace "$v" >/dev/null 2>"$tmp/err"; then
        fail "--pace '$v' is refused"
    else
        check "--pace '$v' is refused with the value named" \
            grep -q "\-\-pace: \"$v\" is not a number of tokens per second in \[0, 1000\]" "$tmp/err"
    fi
done

# --- line mode: /pace N, /show, bad values; line mode does not pace by default
t0=$(now)
printf 'Hello\n' | "$BIN" "${M[@]}" -n 11 --ignore-eos --greedy >/dev/null 2>&1
dt=$(elapsed "$t0")
check "line mode is not paced by default (took $dt s)" between "$dt" 0 0.9
t0=$(now)
printf '/pace 20\n/pace -1\n/pace abc\n/show\nHello\n' |
    "$BIN" "${M[@]}" -n 11 --ignore-eos --greedy >"$tmp/out" 2>&1
dt=$(elapsed "$t0")
check "line mode /pace 20: 11 tokens take about 0.5 s (took $dt s)" between "$dt" 0.45 5
check "/pace 20 confirms the rate" grep -q "pace 20 tokens/s" "$tmp/out"
check "/pace -1 is refused, the rate kept" grep -q '/pace: "-1" is not a number.*(kept 20)' "$tmp/out"
check "/pace abc is refused" grep -q '/pace: "abc" is not a number' "$tmp/out"
check "/show shows the pace" grep -q "^pace        20 tokens/s shown" "$tmp/out"
t0=$(now)
printf 'Hello\n' | "$BIN" "${M[@]}" --pace 10 -n 6 --ignore-eos --greedy >/dev/null 2>&1
dt=$(elapsed "$t0")
check "line mode --pace 10: 6 tokens take about 0.5 s (took $dt s)" between "$dt" 0.45 5
finish
