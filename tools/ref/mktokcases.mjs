// mktokcases.mjs: writes DIR/../tokenizer-cases/NAME.jsonl, the ids an independent encoder gives
// for a set of texts with a fixture's tokenizer.json, for tests of tokentop's tokenizer.
//
// The encoder is @lenml/tokenizers (a dependency-free fork of transformers.js' tokenizers),
// installed by npm under the prefix LENML_DIR (tools/ref/mkllama_golden.sh installs it into
// build/ref-npm). Each line is {"text": ..., "ids": [...]}: the ids `tokenizer(text)` gives
// (special tokens in the text matched first, the post-processor's BOS added), and every case
// decodes back to its text (NFC-normalized where the tokenizer normalizes; after the BOS where one
// was added).
//
// Usage: LENML_DIR=build/ref-npm node tools/ref/mktokcases.mjs FIXTURE_DIR OUT.jsonl
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const [dir, out] = process.argv.slice(2);
if (!dir || !out || !process.env.LENML_DIR) {
    console.error("usage: LENML_DIR=DIR node mktokcases.mjs FIXTURE_DIR OUT.jsonl");
    process.exit(2);
}
const require = createRequire(path.resolve(process.env.LENML_DIR, "node_modules") + "/");
const { TokenizerLoader } = require("@lenml/tokenizers");

const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
const json = read("tokenizer.json");
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: json,
                                            tokenizerConfig: read("tokenizer_config.json") });
const added = json.added_tokens.map((t) => t.content);

const texts = [
    "the cat sat on the mat",
    "Hello, world!",
    " leading space",
    "trailing space ",
    "  two leading spaces",
    "multiple   spaces   inside",
    "I'm sure you're right; they've said we'll see, and he'd know.",
    "SHE'S HERE, WE'LL GO (upper-case contractions)",
    "It's 2024-11-21 and the price is $1,234.56 (approx).",
    "12345678901",
    "line one\nline two\n\n\nafter blank lines",
    "tabs\tand\r\nwindows line ends",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9",
    "cafe\u0301 (e + combining acute)",
    "\u4f60\u597d\uff0c\u4e16\u754c",
    "emoji \ud83d\ude00\ud83d\udc4d end",
    "",
    // every added token, alone and inside text
    ...added,
    added.join(""),
    added.map((t) => "a " + t + " b").join(" "),
    "in the middle" + added[added.length - 1] + "of words",
];

const lines = [];
for (const text of texts) {
    const ids = tok.encode(text);
    const back = ids.length ? tok.decode(ids) : "";
    const want = json.normalizer && json.normalizer.type === "NFC" ? text.normalize("NFC") : text;
    if (!back.endsWith(want)) {
        console.error(`${dir}: ${JSON.stringify(text)} decodes to ${JSON.stringify(back)}`);
        process.exit(1);
    }
    lines.push(JSON.stringify({ text, ids }));
}
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, lines.join("\n") + "\n");
console.log(`wrote ${out} (${lines.length} cases)`);
