#!/usr/bin/env bash
# e2e: the embedded models (models/kjv-target, models/kjv-draft) load in tokentop, tokenize like the
# training script, and score a held-out excerpt with the perplexity PyTorch computed for it
# (models/kjv-check.tsv, written by tools/train/verify.py); a greedy generation is deterministic.
set -u

source "$(dirname "$0")/common.bash"

bin=${BIN:-./tokentop}
check=models/kjv-check.tsv
excerpt=models/kjv-excerpt.txt
err=$tmp/err

for f in "$check" "$excerpt" models/kjv-target/model.safetensors models/kjv-draft/model.safetensors; do
    [ -f "$f" ] || { echo "FAIL: $f is missing (make models writes it)"; exit 1; }
done
value() { awk -F '\t' -v k="$1" '$1 == k { print $2 }' "$check"; }

# Tokenizer: tokentop's ids for the excerpt are the training script's.
ids=$("$bin" tokenize --model models/kjv-target -f "$excerpt" --json 2>"$err")
[ "$ids" = "$(value ids)" ] && ok "tokenizer: excerpt ids equal the training script's" \
    || fail "tokenizer: ids differ: ${ids:0:200} $(cat "$err")"

# Perplexity: tokentop's mean NLL equals PyTorch's within 1e-4 nats, for both models.
for role in target draft; do
    out=$("$bin" score --model "models/kjv-$role" -f "$excerpt" --json 2>"$err")
    got=$(printf '%s' "$out" | sed -n 's/.*"mean_nll":\([-0-9.eE+]*\).*/\1/p')
    pred=$(printf '%s' "$out" | sed -n 's/.*"predicted":\([0-9]*\).*/\1/p')
    want=$(value "${role}_mean_nll")
    if [ -n "$got" ] && awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-4) }' \
            && [ "$pred" = "$(value "${role}_predicted")" ]; then
        ok "$role: mean NLL $got (PyTorch $want) over $pred tokens"
    else
        fail "$role: tokentop score says '$out' $(cat "$err"), PyTorch mean NLL $want over $(value "${role}_predicted") tokens"
    fi
done

# The target is better than the draft on held-out text (the pair is what make run offers).
t=$(value target_mean_nll); d=$(value draft_mean_nll)
awk -v t="$t" -v d="$d" 'BEGIN { exit !(t < d) }' && ok "target NLL $t < draft NLL $d" \
    || fail "target NLL $t is not below draft NLL $d"

# Greedy generation: the same text twice, and English-looking (mostly letters and spaces).
g1=$("$bin" generate --model models/kjv-target -p "In the beginning" --greedy -n 24 -q 2>"$err")
g2=$("$bin" generate --model models/kjv-target -p "In the beginning" --greedy -n 24 -q 2>>"$err")
letters=$(printf '%s' "$g1" | tr -cd 'A-Za-z ' | wc -c)
if [ -n "$g1" ] && [ "$g1" = "$g2" ] && [ "$letters" -ge $(( ${#g1} * 8 / 10 )) ]; then
    ok "greedy generation is repeatable text: ${g1:0:80}"
else
    fail "greedy generation: '$g1' vs '$g2' $(cat "$err")"
fi

finish
