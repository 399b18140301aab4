#!/usr/bin/python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ (small valid and near-valid inputs in
the shapes of the real files: GPT-2's tokenizer and configs, the embedded models' files). Run from
the repository root; the files are committed, so this only needs running again to change them.
Files a fuzzer found (crashes, turned into regression inputs) are kept under names that do not
start with "seed-" and are never touched here."""
import json, os, struct, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
GPT2 = os.path.join(ROOT, "tests", "fixtures", "gpt2")
KJV = os.path.join(ROOT, "models", "kjv-target")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- model.safetensors
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "BOOL": 1, "F64": 8, "F8_E4M3": 1}


def safetensors(tensors, metadata=None, pad=0, header_extra=b"", data_extra=b""):
    """tensors: list of (name, dtype, shape); data laid out in order."""
    hdr, off = {}, 0
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for name, dt, shape in tensors:
        n = SIZES[dt]
        for s in shape:
            n *= s
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(hdr, separators=(",", ":")).encode() + header_extra + b" " * pad
    return struct.pack("<Q", len(h)) + h + bytes(range(256)) * (off // 256) + bytes(off % 256) + data_extra


def gpt2_tensors(V, C, T, L, prefix="", dt="F32"):
    t = [(prefix + "wte.weight", dt, [V, C]), (prefix + "wpe.weight", dt, [T, C])]
    for i in range(L):
        p = "%sh.%d." % (prefix, i)
        t += [(p + "ln_1.weight", dt, [C]), (p + "ln_1.bias", dt, [C]),
              (p + "attn.c_attn.weight", dt, [C, 3 * C]), (p + "attn.c_attn.bias", dt, [3 * C]),
              (p + "attn.c_proj.weight", dt, [C, C]), (p + "attn.c_proj.bias", dt, [C]),
              (p + "ln_2.weight", dt, [C]), (p + "ln_2.bias", dt, [C]),
              (p + "mlp.c_fc.weight", dt, [C, 4 * C]), (p + "mlp.c_fc.bias", dt, [4 * C]),
              (p + "mlp.c_proj.weight", dt, [4 * C, C]), (p + "mlp.c_proj.bias", dt, [C])]
    t += [(prefix + "ln_f.weight", dt, [C]), (prefix + "ln_f.bias", dt, [C])]
    return t


def seeds_safetensors():
    w = lambda n, d: write("safetensors", n, d)
    w("gpt2-layout-f32", safetensors(gpt2_tensors(8, 2, 4, 1, "transformer.")))
    w("gpt2-layout-f16-meta", safetensors(gpt2_tensors(4, 2, 2, 1, "", "F16"), {"format": "pt"}))
    w("bf16-scalar-empty", safetensors([("s", "BF16", []), ("e", "F32", [0, 3]), ("b", "BF16", [3])]))
    w("many-dtypes", safetensors([(d.lower(), d, [2, 1]) for d in SIZES]))
    w("empty-header", safetensors([]))
    w("padded-header", safetensors([("a", "F32", [2])], pad=7))
    w("attn-bias-buffer", safetensors([("h.0.attn.bias", "F32", [1, 1, 2, 2]),
                                       ("h.0.attn.masked_bias", "F32", [])]))
    good = safetensors([("a", "F32", [2, 2]), ("b", "F16", [3])])
    w("truncated-data", good[:-3])
    w("header-len-past-end", struct.pack("<Q", 1 << 20) + b"{}")
    w("header-len-huge", struct.pack("<Q", (1 << 64) - 1) + b"{}")
    w("short-file", b"\x02\x00\x00")
    h = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
    w("overlap", struct.pack("<Q", len(h)) + h + bytes(12))
    h = b'{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}'
    w("shape-overflow", struct.pack("<Q", len(h)) + h)
    h = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'
    w("duplicate-name", struct.pack("<Q", len(h)) + h + bytes(16))
    h = b'{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}} x'
    w("bad-dtype-trailing", struct.pack("<Q", len(h)) + h + bytes(8))
    h = b'{"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[-1],"data_offsets":[8,0]}}'
    w("bad-metadata-negative", struct.pack("<Q", len(h)) + h + bytes(8))
    # The embedded model's real header, without its 11 MB of data (refused: offsets past the end).
    with open(os.path.join(KJV, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        w("kjv-target-header-only", struct.pack("<Q", n) + f.read(n))


# ---- config.json / generation_config.json
def seeds_configs():
    with open(os.path.join(KJV, "config.json")) as f:
        write("config", "kjv-target", f.read())
    gpt2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
            "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
            "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
            "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
            "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
            "vocab_size": 50257}
    write("config", "gpt2", json.dumps(gpt2, indent=2))
    write("config", "minimal", '{"vocab_size":300,"n_positions":8,"n_embd":4,"n_head":2,"n_layer":1}')
    write("config", "n-ctx-erf-untied", '{"vocab_size":300,"n_ctx":8,"n_embd":6,"n_head":3,"n_layer":2,'
          '"n_inner":10,"activation_function":"gelu","tie_word_embeddings":false,"layer_norm_epsilon":0.001}')
    write("config", "bad-heads", '{"vocab_size":300,"n_positions":8,"n_embd":5,"n_head":2,"n_layer":1}')
    write("config", "bad-types", '{"vocab_size":"300","n_positions":8.5,"n_embd":-4,"n_head":null,"n_layer":1e9}')
    write("config", "unsupported", '{"vocab_size":300,"n_positions":8,"n_embd":4,"n_head":2,"n_layer":1,'
          '"activation_function":"relu","scale_attn_by_inverse_layer_idx":true,"reorder_and_upcast_attn":true}')
    write("config", "truncated", json.dumps(gpt2)[:200])
    with open(os.path.join(KJV, "generation_config.json")) as f:
        write("generation_config", "kjv-target", f.read())
    write("generation_config", "gpt2", '{"_from_model_config": true, "bos_token_id": 50256, '
          '"eos_token_id": 50256, "transformers_version": "4.26.0.dev0"}')
    write("generation_config", "eos-array-nulls", '{"eos_token_id":[50256,198],"temperature":null,'
          '"top_k":0,"top_p":1,"do_sample":false,"max_new_tokens":0,"repetition_penalty":1.2}')
    write("generation_config", "bad-values", '{"temperature":-1,"top_p":1.5,"top_k":2.5,'
          '"do_sample":"yes","eos_token_id":99999999,"repetition_penalty":0}')
    write("generation_config", "empty", "{}")


# ---- vocab.json + merges.txt (vocab, NUL, merges)
def tokenizer_subset(vocab_path, merges_path, n_merges):
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    with open(merges_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    head = lines[0] if lines[0].startswith("#version") else None
    merges = [l for l in lines[1 if head else 0:] if l][:n_merges]
    byid = sorted(vocab.items(), key=lambda kv: kv[1])
    keep = {k: v for k, v in byid[:256]}
    for m in merges:
        a, b = m.split(" ")
        keep[a + b] = vocab[a + b]
    if "<|endoftext|>" in vocab:
        keep["<|endoftext|>"] = vocab["<|endoftext|>"]
    # Renumber densely in the original order, as a real vocabulary is.
    dense = {k: i for i, (k, _) in enumerate(sorted(keep.items(), key=lambda kv: kv[1]))}
    v = json.dumps(dense, ensure_ascii=False, separators=(", ", ": "))
    m = ((head + "\n") if head else "") + "\n".join(merges) + "\n"
    return v, m


def seeds_tokenizer_files():
    w = lambda n, v, m: write("tokenizer_files", n, v + "\0" + m)
    v, m = tokenizer_subset(os.path.join(GPT2, "vocab.json"), os.path.join(GPT2, "merges.txt"), 120)
    w("gpt2-subset", v, m)
    v2, m2 = tokenizer_subset(os.path.join(KJV, "vocab.json"), os.path.join(KJV, "merges.txt"), 60)
    w("kjv-subset", v2, m2)
    w("gpt2-subset-crlf-noversion", v, "\r\n".join(m.split("\n")[1:]))
    w("gpt2-subset-repeated-merge", v, m + m.split("\n")[1] + "\n")
    d = json.loads(v)
    d.pop("A")
    w("missing-byte", json.dumps(d, ensure_ascii=False), m)
    w("merge-not-in-vocab", v, m + "x y z\n")
    w("merge-result-missing", v, m + "Ġ Ġ\n")
    d = json.loads(v)
    d["dup"] = 0
    w("duplicate-id", json.dumps(d, ensure_ascii=False), m)
    w("not-object", "[1,2,3]", "")
    w("escapes", v[:-1] + ', "\\u0000x": 9999, "\\ud83d\\ude00": 1e1}', m)


# ---- text into the tokenizer
def seeds_tokenizer_text():
    texts = []
    with open(os.path.join(GPT2, "tokenizer-cases.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % 6 == 0:
                texts.append(json.loads(line)["text"])
    for i, t in enumerate(texts):
        write("tokenizer_text", "case-%02d" % i, t)
    w = lambda n, d: write("tokenizer_text", n, d)
    w("invalid-utf8", b"ok \xff\xfe \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 end\xc3")
    w("endoftext", "<|endoftext|>In the beginning<|endoftext|>\n\n")
    w("whitespace", " \t\n\r\n   \u00a0\u3000x  \n")
    w("contractions", "I'm you're they've we'll he'd it's 'S 'T n't")
    w("long-run", "a" * 300 + " " + "9" * 40)
    w("scripts", "Καλημέρα мир こんにちは 你好 😀👍🏽 عربى हिन्दी ½²³")
    with open(os.path.join(ROOT, "models", "kjv-excerpt.txt"), encoding="utf-8") as f:
        w("kjv", f.read(600))


# ---- /load files
def seeds_session_file():
    w = lambda n, d: write("session_file", n, d)
    with open(os.path.join(ROOT, "prompts", "session-example.json")) as f:
        w("example-text-only", f.read())
    toks = [{"id": i, "origin": o, "p": p, "turn": t, "text": "x"} for i, o, p, t in
            [(72, "user", 1, 0), (101, "sampled", 0.25, 0), (300, "forced", 0.01, 0),
             (77, "draft_accepted", 0.5, 1), (511, "target_resample", 0.125, 1), (5, "bonus", 1, 1)]]
    full = {"format": "tokentop-session", "version": 1, "model": "tiny", "vocab_size": 512,
            "settings": {"temperature": 0.7, "top_k": 8, "top_p": 1, "min_p": 0,
                         "repetition_penalty": 1, "presence_penalty": 0, "frequency_penalty": 0,
                         "penalty_window": 64, "greedy": False, "order": "llama", "seed": 42,
                         "max_new_tokens": 6, "stop": ["\n\n", "END"]},
            "text": "Hey", "tokens": toks}
    w("saved", json.dumps(full, indent=2))
    f2 = dict(full, settings=dict(full["settings"], seed="18446744073709551615", greedy=True))
    w("seed-string", json.dumps(f2))
    w("plain-text", "In the beginning God created the heaven and the earth.\n")
    w("empty-tokens", '{"format":"tokentop-session","version":1,"tokens":[]}')
    w("bad-version", '{"format":"tokentop-session","version":2,"text":"x"}')
    w("bad-token", '{"format":"tokentop-session","version":1,"tokens":[{"id":512},{"id":-1,"turn":-2}]}')
    w("bad-settings", '{"format":"tokentop-session","version":1,"vocab_size":512,"settings":'
      '{"temperature":-1,"top_k":1.5,"order":"x","seed":-3,"stop":[""],"max_new_tokens":0},"text":"a"}')
    w("vocab-mismatch", '{"format":"tokentop-session","version":1,"vocab_size":50257,"text":"a"}')


# ---- slash-command lines (first byte: bit 0 line mode, bit 1 busy)
def seeds_command_line():
    lines = ["/temp 0.7", "/temp", "/te 0", "/t", "/topk 40", "/topp 1.5", "/minp 0.05",
             "/presence 0.5", "/frequency \"0.25\"", "/repeat 1.1", "/window -1", "/order llama",
             "/greedy", "/sample", "/seed 18446744073709551615", "/seed -1", "/max 64",
             "/stop", "/stop add \"\\n\\n\"", "/stop add \\x41\\tB", "/stop clear", "/stop \"a b\" c",
             "/show", "/ids 3", "/reset", "/clear", "/undo", "/undo 2", "/regen", "/step on",
             "/pick 3", "/bars 12", "/bars 99", "/spec on", "/spec off", "/gamma auto", "/gamma 4",
             "/help", "/help temp", "/?", "/quit", "/x", "/", "/temp \"unterminated",
             "/stop add \\q", "/stop add \\x0", "//text", "plain text", " /temp 1", "/temp 1 2 3",
             "/" + "a" * 70]
    for i, l in enumerate(lines):
        write("command_line", "%02d" % i, bytes([i % 4]) + l.encode())


# ---- command-line options (first byte: command; arguments separated by NUL)
def seeds_cli_options():
    cases = [
        (0, ["--model", "models/kjv-target", "--draft", "models/kjv-draft", "--spec", "off"]),
        (1, ["-p", "Hello", "-n", "40", "--temp", "0.8", "--top-p", "0.95", "--seed", "7"]),
        (1, ["-f", "prompt.txt", "--greedy", "-n", "20", "--json", "--stop", "\n\n", "--stop", "x"]),
        (2, ["--json", "-p", "text"]),
        (3, ["-f", "x.txt", "--chunk", "128", "--bos", "--dump-logits", "out.bin"]),
        (1, ["--temp", "-1"]), (1, ["--top-p", "1.5"]), (1, ["--top-k", "abc"]),
        (1, ["--temp", "nan"]), (1, ["--min-p", "inf"]), (0, ["--help"]), (1, ["-h"]),
        (1, ["--backend", "cuda", "--dtype", "bf16", "--threads", "4", "--ctx", "64", "--gamma", "5",
             "--gamma-adaptive", "--no-graphs", "--no-context-shift", "--context-keep", "0.5"]),
        (1, ["--order", "llama", "--repeat", "1.1", "--presence", "0.1", "--frequency", "0.2",
             "--window", "-1", "--min-tokens", "3", "--ignore-eos", "--echo", "-q"]),
        (1, ["-qx"]), (1, ["-p"]), (1, ["-p", "a", "-f", "b"]), (1, ["stray"]), (0, ["--mod=x"]),
        (1, ["--max-tokens=0"]), (1, ["--seed", "-5"]), (1, ["--stop", ""]),
    ]
    for i, (c, args) in enumerate(cases):
        write("cli_options", "%02d" % i, bytes([c]) + b"\0".join(a.encode() for a in args))


# ---- GGUF (the writer is tools/peer/hf_to_gguf.py's)
sys.path.insert(0, os.path.join(ROOT, "tools", "peer"))


def seeds_gguf():
    import numpy as np
    import hf_to_gguf as g
    w = lambda n, d: write("gguf", n, d)
    rng = np.random.default_rng(5)

    def blocks(n_blocks, nbytes, scale_at):
        """Random quant blocks with a finite fp16 scale (1/16) at each offset of scale_at."""
        b = bytearray(rng.integers(0, 256, size=n_blocks * nbytes, dtype=np.uint8).tobytes())
        for i in range(n_blocks):
            for at in scale_at:
                b[i * nbytes + at:i * nbytes + at + 2] = b"\x00\x2c"
        return bytes(b)

    f32 = lambda n: rng.normal(size=n).astype("<f4").tobytes()
    every_type = [
        ("f32", [8, 2], 0, f32(16)),
        ("f16", [8, 1], 1, rng.normal(size=8).astype("<f2").tobytes()),
        ("bf16", [8], 30, bytes(16)),
        ("q8_0", [32, 1], 8, blocks(1, 34, [0])),
        ("q4_0", [32, 2], 2, blocks(2, 18, [0])),
        ("q5_0", [32], 6, blocks(1, 22, [0])),
        ("q4_k", [256], 12, blocks(1, 144, [0, 2])),
        ("q6_k", [256], 14, blocks(1, 210, [208])),
    ]
    T = g
    hparams = [("general.architecture", T.T_STRING, "llama"), ("general.alignment", T.T_UINT32, 32),
               ("general.file_type", T.T_UINT32, 15),
               ("llama.block_count", T.T_UINT32, 1), ("llama.embedding_length", T.T_UINT32, 8),
               ("llama.attention.head_count", T.T_UINT32, 2),
               ("llama.attention.layer_norm_rms_epsilon", T.T_FLOAT32, 1e-5),
               ("llama.rope.freq_base", T.T_FLOAT32, 10000.0)]
    tok = [("tokenizer.ggml.model", T.T_STRING, "gpt2"), ("tokenizer.ggml.pre", T.T_STRING, "llama-bpe"),
           ("tokenizer.ggml.tokens", T.T_ARRAY, (T.T_STRING, ["a", "b", "ab", "\u0120", "<s>"])),
           ("tokenizer.ggml.token_type", T.T_ARRAY, (T.T_INT32, [1, 1, 1, 1, 3])),
           ("tokenizer.ggml.scores", T.T_ARRAY, (T.T_FLOAT32, [0.0, -1.0, -2.0, -3.0, 0.0])),
           ("tokenizer.ggml.merges", T.T_ARRAY, (T.T_STRING, ["a b"])),
           ("tokenizer.ggml.bos_token_id", T.T_UINT32, 4),
           ("tokenizer.ggml.add_bos_token", T.T_BOOL, True)]
    w("every-type-v3", g.gguf_bytes(hparams + tok, every_type))
    w("every-type-v2", g.gguf_bytes(hparams, every_type, version=2))
    w("align-64", g.gguf_bytes([("general.alignment", T.T_UINT32, 64)], every_type[:4],
                               alignment=64))
    values = [("u8", T.T_UINT8, 1), ("i8", T.T_INT8, -1), ("u16", T.T_UINT16, 2),
              ("i16", T.T_INT16, -2), ("u32", T.T_UINT32, 3), ("i32", T.T_INT32, -3),
              ("f32", T.T_FLOAT32, 0.5), ("b", T.T_BOOL, False), ("s", T.T_STRING, "text"),
              ("u64", T.T_UINT64, 4), ("i64", T.T_INT64, -4), ("f64", T.T_FLOAT64, 0.25),
              ("arr", T.T_ARRAY, (T.T_UINT16, [1, 2, 3])), ("empty", T.T_ARRAY, (T.T_STRING, []))]
    w("every-value", g.gguf_bytes(values, []))
    w("unsupported-q5_k", g.gguf_bytes(hparams, [("q5_k", [256], 13, bytes(176))]))
    w("no-tensors", g.gguf_bytes(tok, []))
    nan = bytearray(g.gguf_bytes([], [("q8_0", [32, 2], 8, blocks(2, 34, [0]))]))
    nan[-34:-32] = b"\x00\x7e"
    w("nan-scale", bytes(nan))
    full = g.gguf_bytes(hparams + tok, every_type)
    w("truncated", full[:len(full) * 2 // 3])


def main():
    seeds_gguf()
    seeds_safetensors()
    seeds_configs()
    seeds_tokenizer_files()
    seeds_tokenizer_text()
    seeds_session_file()
    seeds_command_line()
    seeds_cli_options()


if __name__ == "__main__":
    sys.exit(main())
