#!/usr/bin/env bash
# degeneration.sh: greedy decoding, beam search and sampling on one prompt, side by side in text,
# for showing a class how beam search settles on a high-probability loop and sampling wanders:
#
#   prompts/degeneration.sh [--model DIR] [--bin PATH] [-n N] [--seed S] [PROMPT]
#
# Default model: the embedded one. Runs on the CPU (beams and batched samples need it).
set -u
BIN=./tokentop
MODEL=()
N=40
SEED=7
while [ $# -gt 0 ]; do
    case $1 in
        --model) MODEL=(--model "$2"); shift 2 ;;
        --bin) BIN=$2; shift 2 ;;
        -n) N=$2; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        -*) echo "degeneration.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
PROMPT=${1:-"And the LORD said unto Moses,"}
run() { "$BIN" generate "${MODEL[@]}" --backend cpu -p "$PROMPT" -n "$N" --ignore-eos "$@"; }

echo "prompt: $PROMPT"
echo
echo "=== greedy (--greedy)"
run --greedy -q
echo
echo
echo "=== beam search (--num-beams 4): the best beam, then the ranking"
run --num-beams 4 2>&1
echo
echo "=== beam search that may not repeat a 3-gram (--num-beams 4 --no-repeat-ngram 3)"
run --num-beams 4 --no-repeat-ngram 3 -q
echo
echo "=== sampling (--samples 3 --seed $SEED --temp 1 --top-p 0.95): sample i = --seed $SEED+i"
run --samples 3 --seed "$SEED" --temp 1 --top-p 0.95 -q
