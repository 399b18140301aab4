#!/usr/bin/env bash
# End-to-end checks of the non-interactive commands (generate, tokenize, score) on a tiny random
# model: determinism, JSON records, stop strings, the context-full path, and bad input.
set -u
source "$(dirname "$0")/common.bash"

"$MKMODEL" "$tmp/m" --size tiny --seed 3 >/dev/null || { echo "FAIL mkmodel"; exit 1; }
M=(--model "$tmp/m" --threads 1)

# --- determinism and modes
a=$("$BIN" generate "${M[@]}" -p "Hello there" -n 24 --seed 11 --temp 0.9 -q)
b=$("$BIN" generate "${M[@]}" -p "Hello there" -n 24 --seed 11 --temp 0.9 -q)
c=$("$BIN" generate "${M[@]}" -p "Hello there" -n 24 --seed 12 --temp 0.9 -q)
check "same seed gives the same text" test "$a" == "$b"
check "another seed gives other text" test "$a" != "$c"
g1=$("$BIN" generate "${M[@]}" -p "Hello there" -n 24 --greedy -q --seed 1)
g2=$("$BIN" generate "${M[@]}" -p "Hello there" -n 24 --temp 0 -q --seed 2)
check "--greedy equals --temp 0 whatever the seed" test "$g1" == "$g2"

# --- generate -q ends its text with a newline; a missing model directory is named as such
"$BIN" generate "${M[@]}" -p "Hello there" -n 6 --seed 11 -q --ignore-eos > "$tmp/q.out"
check "generate -q ends its output with a newline" test "$(tail -c 1 "$tmp/q.out" | od -An -c | tr -d ' ')" = '\n'
"$BIN" generate --model /nonexistent -p "Hello" -n 2 2> "$tmp/nx.err"
check "--model /nonexistent says the directory does not exist and what one holds" \
    grep -q '/nonexistent: no such directory; a model directory holds config.json, model.safetensors (or its shards) and tokenizer.json (or GPT-2.s vocab.json and merges.txt)' "$tmp/nx.err"

# --- generation_config.json supplies defaults; the command line overrides them
mkdir -p "$tmp/gc" && cp "$tmp"/m/* "$tmp/gc/"
printf '{"do_sample": false, "max_new_tokens": 7}\n' > "$tmp/gc/generation_config.json"
d1=$("$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello there" --seed 1 -q)
d2=$("$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello there" --seed 2 -q)
g7=$("$BIN" generate "${M[@]}" -p "Hello there" -n 7 --greedy -q)
check "do_sample false in generation_config means greedy" test "$d1" == "$g7" -a "$d2" == "$g7"
"$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello" --json > "$tmp/gcj"
check "max_new_tokens comes from generation_config" grep -q '"generated_tokens":7' "$tmp/gcj"
"$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello" --temp 0.9 --seed 3 -n 12 --json > "$tmp/gcj2"
check "--temp on the command line overrides do_sample false" grep -q '"u":0\.' "$tmp/gcj2"
printf '{"top_k": 2}\n' > "$tmp/gc/generation_config.json"
"$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello" -n 3 --seed 1 --json > "$tmp/gcj3"
check "top_k comes from generation_config" grep -q '"kept":2,' "$tmp/gcj3"
"$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello" -n 3 --seed 1 --json --top-k 0 > "$tmp/gcj4"
check "--top-k 0 on the command line overrides it" bash -c "! grep -q '\"kept\":2,' '$tmp/gcj4'"
printf '{"temperature": -2, "do_sample": false}\n' > "$tmp/gc/generation_config.json"
bad=$("$BIN" generate --model "$tmp/gc" --threads 1 -p "Hello there" -n 24 --seed 11 --temp 0.9 -q 2>"$tmp/gcerr")
check "an invalid generation_config.json is named with its field and ignored" \
    grep -q 'gc/generation_config.json: temperature: -2 is negative (the file is ignored)' "$tmp/gcerr"
check "the model still runs without the ignored file's settings" test "$bad" == "$a"

# --- JSON records
"$BIN" generate "${M[@]}" -p "Hello" -n 5 --seed 1 --json > "$tmp/j" 2>"$tmp/err"
check "generate --json writes one JSON object per line" "$JSONCHECK" --has done < "$tmp/j"
check "one record per token plus the summary" test "$(grep -c '"step"' "$tmp/j")" -ge 5
check "records carry top tokens with cut stages" grep -q '"top":\[{"id"' "$tmp/j"
check "summary names the stop reason" grep -q '"stop_reason":"max_tokens"' "$tmp/j"
check "summary has timings" grep -q '"ttft_ms":' "$tmp/j"
"$BIN" generate "${M[@]}" -p "Hello" -n 5 --seed 1 --json --top-k 2 > "$tmp/j2"
check "top-k cut is reported" grep -q '"cut":"top_k"' "$tmp/j2"

# --- stop strings: cut the greedy text at a later piece of itself
full=$("$BIN" generate "${M[@]}" -p "Hello" -n 30 --greedy -q)
stop=${full:12:3}
if [ ${#stop} -eq 3 ]; then
    cut=$("$BIN" generate "${M[@]}" -p "Hello" -n 30 --greedy -q --stop "$stop")
    prefix=${full%%"$stop"*}
    check "output stops before the stop string" test "$cut" == "$prefix"
    "$BIN" generate "${M[@]}" -p "Hello" -n 30 --greedy --stop "$stop" --json > "$tmp/j3"
    check "stop reason is stop_string" grep -q '"stop_reason":"stop_string"' "$tmp/j3"
else
    fail "greedy output too short to pick a stop string"
fi

# --- context full: the tiny model has 64 positions; keep going past them
"$BIN" generate "${M[@]}" -p "Hello" -n 150 --seed 5 --ignore-eos --json > "$tmp/j4"
check "generation continues past the context" grep -q '"generated_tokens":150' "$tmp/j4"
check "context shift is reported" grep -q '"context_shift":{"dropped":' "$tmp/j4"
"$BIN" generate "${M[@]}" -p "Hello" -n 150 --seed 5 --ignore-eos --json --no-context-shift > "$tmp/j5"
check "without shifting it stops with reason context" grep -q '"stop_reason":"context"' "$tmp/j5"
"$BIN" generate "${M[@]}" --ctx 16 -p "Hello" -n 40 --seed 5 --ignore-eos 2> "$tmp/e6" >/dev/null
check "text mode says the context was re-prefilled" grep -q "context full" "$tmp/e6"

# --- tokenize and score
ids=$("$BIN" tokenize "${M[@]}" -p "Hello world" --json)
check "tokenize --json prints an array of ids" bash -c "[[ '$ids' =~ ^\[[0-9]+(,[0-9]+)*\]$ ]]"
echo "Hello world" | "$BIN" tokenize "${M[@]}" --json > "$tmp/t2"
check "tokenize reads stdin" test -s "$tmp/t2"
# tokenizer.json directories (the real vocabularies the Check suites use)
fx="$(dirname "$0")/../fixtures/tokenizers"
for name in qwen3 mistral; do
    mkdir -p "$tmp/$name" && xz -dc "$fx/$name/tokenizer.json.xz" > "$tmp/$name/tokenizer.json" &&
        cp "$fx/$name/tokenizer_config.json" "$tmp/$name/"
done
ids=$("$BIN" tokenize --model "$tmp/mistral" -p "Hello world" --json)
check "tokenize --json starts with the BOS a SentencePiece tokenizer adds" test "$ids" == "[1,22557,1526]"
"$BIN" tokenize --model "$tmp/qwen3" -p $'<|im_start|>user\nhi<|im_end|>' > "$tmp/t3"
check "tokenize shows special tokens marked and no BOS for Qwen" \
    bash -c "head -1 '$tmp/t3' | grep -q \$'^151644\t\u27e8<|im_start|>\u27e9\$' && tail -1 '$tmp/t3' | grep -q '^151645'"
"$BIN" tokenize --model "$tmp" -p hi 2> "$tmp/t4" >/dev/null
check "a directory without a tokenizer says which files it looked for" \
    grep -q "no tokenizer: looked for tokenizer.json, and for vocab.json with merges.txt" "$tmp/t4"
printf 'In the beginning was the word, and the word was with the model.\n' > "$tmp/text"
"$BIN" score "${M[@]}" -f "$tmp/text" --json > "$tmp/s"
check "score reports a perplexity" grep -q '"perplexity":' "$tmp/s"
bpb_of() { "$JSONCHECK" --get "$1" < "$tmp/s"; }
check "score's bits per byte is its total NLL in bits over the file's bytes" awk -v m="$(bpb_of mean_nll)" \
    -v p="$(bpb_of predicted)" -v b="$(bpb_of bytes)" -v got="$(bpb_of bits_per_byte)" \
    -v size="$(stat -c %s "$tmp/text")" 'BEGIN { want = m * p / log(2) / size;
    d = got - want; exit !(b == size && d < 1e-6 && d > -1e-6) }'
"$BIN" score "${M[@]}" -f "$tmp/text" --json --chunk 7 > "$tmp/s7"
check "score with short chunks predicts the same number of tokens" \
    test "$("$JSONCHECK" --get predicted < "$tmp/s")" == "$("$JSONCHECK" --get predicted < "$tmp/s7")"
# score --ids: the ids tokenize gives score exactly as the text does, logit for logit
tids=$("$BIN" tokenize "${M[@]}" -f "$tmp/text" --json | tr -d '[]')
"$BIN" score "${M[@]}" -f "$tmp/text" --json --dump-logits "$tmp/lt" > /dev/null
"$BIN" score "${M[@]}" --ids "$tids" --json --dump-logits "$tmp/li" > "$tmp/si"
check "score --ids of the text's tokens gives the text's mean NLL" \
    test "$("$JSONCHECK" --get mean_nll < "$tmp/s")" == "$("$JSONCHECK" --get mean_nll < "$tmp/si")"
check "score --ids dumps the same logits as score -f" cmp -s "$tmp/lt" "$tmp/li"
check "score --ids reports no bits per byte (there are no bytes)" \
    bash -c "! grep -q bits_per_byte '$tmp/si'"
"$BIN" score "${M[@]}" --ids 1,x,3 2> "$tmp/sie"
check "score --ids names a bad id" grep -q "score: --ids: id 2: 'x' is not an integer" "$tmp/sie"
"$BIN" score "${M[@]}" --ids 5 2> "$tmp/sie1"
check "score --ids of one id says two are needed" grep -q -- "--ids has 1 token(s); at least 2 are needed" "$tmp/sie1"

# --- bench on the tiny model (figures are not checked here, only that the report is complete)
"$BIN" bench "${M[@]}" --prompt-tokens 16 --gen-tokens 8 --json > "$tmp/b" 2>"$tmp/be"
check "bench --json reports prefill, decode and bandwidth use" \
    "$JSONCHECK" --has prefill_tok_s --has decode_tok_s --has ttft_ms --has peak_rss_mb \
    --has kv_speedup --has bandwidth_fraction --has bandwidth_fraction_with_kv < "$tmp/b"
check "bench --json reports the spread of prefill, decode and bandwidth, and the threads" \
    "$JSONCHECK" --has prefill_tok_s_min --has prefill_tok_s_max --has decode_tok_s_q1 \
    --has decode_tok_s_q3 --has bandwidth_gb_s_min --has bandwidth_gb_s_median \
    --has bandwidth_gb_s_max --has threads_note < "$tmp/b"
bget() { "$JSONCHECK" --get "$1" < "$tmp/b"; }
ordered() {     # keys in order: each value positive and at most the next
    local prev=0 v
    for k in "$@"; do
        v=$(bget "$k") || return 1
        awk -v a="$prev" -v b="$v" 'BEGIN { exit !(b > 0 && a <= b) }' || return 1
        prev=$v
    done
}
check "bench's spreads hold their medians (least <= median <= most)" \
    ordered prefill_tok_s_min prefill_tok_s prefill_tok_s_max
check "bench's decode quartiles hold its median" ordered decode_tok_s_q1 decode_tok_s decode_tok_s_q3
check "bench's bandwidth passes: least <= median <= best = the figure decode is compared with" \
    ordered bandwidth_gb_s_min bandwidth_gb_s_median bandwidth_gb_s_max bandwidth_gb_s
check "bench names the threads it used" grep -q '"threads_note":"[0-9]* thread' "$tmp/b"
check "bench names the kernel set" \
    grep -Eq '"engine":"cpu: [^"]*, (amx|avx512bf16|avx512vnni|avx512|avx2|reference), [a-z0-9]* weights' "$tmp/b"
# The amx set where the CPU has AMX-BF16 (and the OS grants the tiles); TOKENTOP_NO_AMX falls back.
if grep -qw amx_bf16 /proc/cpuinfo 2>/dev/null; then
    check "bench on a CPU with AMX-BF16 uses the amx set" grep -q ', amx, ' "$tmp/b"
fi
"$BIN" bench --model "$tmp/m" --threads 2 --prompt-tokens 8 --gen-tokens 4 --batch 1,3 --json \
    > "$tmp/bb" 2>/dev/null
check "bench --batch 1,3 reports both sizes, each with every job on both of --threads 2" \
    awk '{ n = gsub(/"batch":[13],"aggregate_tok_s":[0-9.e+-]+,"per_sequence_tok_s":[^}]*"parallel_job_share":1}/, "") }
         END { exit n != 2 }' "$tmp/bb"
TOKENTOP_NO_AMX=1 "$BIN" bench "${M[@]}" --dtype bf16 --prompt-tokens 16 --gen-tokens 4 --json \
    > "$tmp/bn" 2>/dev/null
check "TOKENTOP_NO_AMX=1: bench runs bf16 on another kernel set" \
    grep -Eq '"engine":"cpu: [^"]*, (avx512bf16|avx512vnni|avx512|avx2|reference), bf16 weights' "$tmp/bn"

# --- bad input: a clear message naming the value, exit status 2, nothing run
expect_err() {
    local name=$1 pattern=$2; shift 2
    "$BIN" "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    if [ $rc -ne 0 ] && grep -q -- "$pattern" "$tmp/err"; then ok "$name"
    else fail "$name (rc=$rc, stderr: $(head -c 300 "$tmp/err"))"; fi
}
expect_err "negative temperature rejected" "-1" generate "${M[@]}" -p x --temp -1
expect_err "top-p above 1 rejected" "1.5" generate "${M[@]}" -p x --top-p 1.5
expect_err "non-numeric top-k rejected" "abc" generate "${M[@]}" -p x --top-k abc
expect_err "NaN temperature rejected" "nan" generate "${M[@]}" -p x --temp nan
expect_err "infinite min-p rejected" "inf" generate "${M[@]}" -p x --min-p inf
expect_err "unknown option named" "--bogus" generate "${M[@]}" -p x --bogus
expect_err "bad dtype named" "fp8" generate "${M[@]}" -p x --dtype fp8
expect_err "missing model directory named" "$tmp/nope" generate --model "$tmp/nope" -p x
mkdir -p "$tmp/pickle" && cp "$tmp/m/config.json" "$tmp/m/vocab.json" "$tmp/m/merges.txt" "$tmp/pickle/" \
    && echo junk > "$tmp/pickle/pytorch_model.bin"
expect_err "pickle-only directory refused with the safetensors advice" "safetensors" generate --model "$tmp/pickle" -p x
expect_err "unknown command named" "frobnicate" frobnicate
expect_err "missing prompt file named" "$tmp/none.txt" generate "${M[@]}" -f "$tmp/none.txt"

finish
