#!/usr/bin/env bash
# chat_cli.sh: `tokentop generate` on a model with a chat template: the prompt is wrapped in the
# template's format (more prompt tokens than the raw text), --chat-template off gives the raw
# continuation, a bad format name is refused naming the formats, and a template no format matches
# is said on stderr (naming its file) before a raw continuation; --samples wraps it the same way.
set -u
source "$(dirname "$0")/common.bash"

"$MKMODEL" "$tmp/m" --size tiny --seed 3 >/dev/null || { echo "FAIL mkmodel"; exit 1; }
# Qwen2.5's chat template on a GPT-2 vocabulary: its eos_token (<|im_end|>) is not in this
# vocabulary, which the tokenizer refuses, so the token fields are left out.
sed '/"eos_token"/d' "$(dirname "$0")/../fixtures/chat/qwen2.5/tokenizer_config.json" \
    > "$tmp/m/tokenizer_config.json" || exit 1
M=(--model "$tmp/m" --threads 1 -n 2 --greedy)
prompt_tokens() { sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' | tail -1; }

chat=$("$BIN" generate "${M[@]}" -p "Hi" --json 2>/dev/null | prompt_tokens)
raw=$("$BIN" generate "${M[@]}" -p "Hi" --json --chat-template off 2>/dev/null | prompt_tokens)
check "a model with a chat template wraps the prompt (${chat:-?} tokens against ${raw:-?} raw)" \
    test -n "$chat" -a -n "$raw" -a "${chat:-0}" -gt $((${raw:-0} + 20))
named=$("$BIN" generate "${M[@]}" -p "Hi" --json --chat-template zephyr 2>/dev/null | prompt_tokens)
check "--chat-template NAME picks another format (${named:-?} tokens)" \
    test -n "$named" -a "${named:-0}" -gt "${raw:-0}" -a "${named:-0}" != "${chat:-0}"

# --samples runs each sample as a chat session too: sample i is the chat run --seed 20+i
"$BIN" generate --model "$tmp/m" --threads 1 -p "Hi" -n 6 --temp 1 --samples 2 --seed 20 --json \
    2>/dev/null | grep '"sample":1,' | grep '"step"' | sed 's/"sample":1,//' > "$tmp/s1"
"$BIN" generate --model "$tmp/m" --threads 1 -p "Hi" -n 6 --temp 1 --seed 21 --json 2>/dev/null |
    grep '"step"' > "$tmp/one"
check "--samples in chat mode: sample 1 is the chat run --seed 21" \
    test -s "$tmp/one" -a "$(md5sum < "$tmp/s1")" = "$(md5sum < "$tmp/one")"

"$BIN" generate "${M[@]}" -p "Hi" --chat-template chatlm >/dev/null 2>"$tmp/err"
rc=$?
check "--chat-template with an unknown name exits 2" test "$rc" = 2
check "... naming the formats" grep -q '"chatlm" is not a chat format (chatml, llama3' "$tmp/err"

printf '{"chat_template": "<start_of_turn>{{ m }}<end_of_turn>"}\n' > "$tmp/m/tokenizer_config.json"
out=$("$BIN" generate "${M[@]}" -p "Hi" --json 2>"$tmp/err2" | prompt_tokens)
check "an unknown template is named on stderr" \
    grep -q "m/tokenizer_config.json: chat_template matches no built-in chat format" "$tmp/err2"
check "... and the prompt stays raw" test "${out:-x}" = "${raw:-y}"
printf '{"chat_template": 7}\n' > "$tmp/m/tokenizer_config.json"
"$BIN" generate "${M[@]}" -p "Hi" -q >/dev/null 2>"$tmp/err3"
check "a chat_template of the wrong type is named and generation goes on raw" \
    grep -q 'tokenizer_config.json: chat_template: expected a string or a list of named templates, got a number (chat mode off)' "$tmp/err3"
finish
