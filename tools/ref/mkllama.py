#!/usr/bin/python3
"""mkllama.py: writes a small random Llama-family model in the exact Hugging Face layout.

The directory it writes is what transformers' save_pretrained and tokenizers write for that
model_type (llama, mistral, qwen2, qwen3):
  config.json               as the *Config class writes it (sorted keys, indent 2): architectures,
                            model_type, torch_dtype, bos/eos ids, the family's own fields
  generation_config.json    bos/eos ids (eos a list where the family's instruct models have one)
  model.safetensors         HF tensor names, nn.Linear's row-major [out, in], __metadata__
                            {"format": "pt"}, tensors sorted by name, header padded to 8 bytes;
  or model-0000k-of-0000N.safetensors + model.safetensors.index.json (weight_map, total_size)
                            with --shards N, split in state-dict order as transformers does
  tokenizer.json            a small byte-level BPE: the 256 byte tokens, a few English merges and
                            the family's special tokens, with the family's pre-tokenizer (Llama 3's
                            or Qwen2's Split regex + ByteLevel; GPT-2's ByteLevel for mistral)
  tokenizer_config.json     bos/eos/pad token names as the family's tokenizer_config has them

Deterministic from --seed. The weights are random but not degenerate: projections ~N(0, 1/fan_in)
(N(0, 0.02) would make every logit ~0 and every continuation flat) with o_proj and down_proj 4x
that, norm weights 1 +- 0.1, biases N(0, 0.2), embedding and lm_head N(0, 0.4): logits spread over
several units, greedy continuations vary and the top-5 probabilities differ.

Usage:
  mkllama.py DIR --type llama|mistral|qwen2|qwen3 [--hidden 64] [--layers 2] [--heads 4]
             [--kv-heads 2] [--head-dim D] [--inter 96] [--ctx 128] [--theta T]
             [--file-dtype f32|f16|bf16] [--untied] [--attention-bias]
             [--rope-llama3 FACTOR,LOW,HIGH,ORIGINAL_MAX] [--sliding-window N] [--vocab-pad V]
             [--shards N] [--merges-as-pairs] [--seed S]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import round_bf16  # noqa: E402  (one bf16 rounding for the tools)

def transformers_version(family):
    return "4.51.0" if family == "qwen3" else "4.46.0"     # the first with Qwen3

# --------------------------------------------------------------------------------------------
# tokenizer

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# frequent English pairs, in merge order; each part exists before its merge
MERGES = [("Ġ", "t"), ("Ġ", "a"), ("h", "e"), ("i", "n"), ("r", "e"), ("o", "n"), ("Ġt", "he"),
          ("e", "r"), ("Ġ", "s"), ("a", "t"), ("Ġ", "w"), ("Ġ", "o"), ("e", "n"), ("Ġ", "c"),
          ("i", "t"), ("i", "s"), ("a", "n"), ("o", "r"), ("e", "s"), ("Ġ", "b"), ("e", "d"),
          ("Ġ", "f"), ("in", "g"), ("Ġ", "p"), ("o", "u"), ("Ġa", "n"), ("a", "l"), ("a", "r"),
          ("Ġt", "o"), ("Ġ", "m"), ("Ġo", "f"), ("Ġ", "in"), ("Ġ", "d"), ("Ġ", "h"),
          ("Ġan", "d"), ("i", "c"), ("a", "s"), ("l", "e"), ("Ġt", "h"), ("i", "on"),
          # merges that show the pre-tokenizer: contractions (Llama 3's and Qwen's regex take
          # "'S" case-insensitively, GPT-2's does not), digit runs (Llama 3 splits them in 3s,
          # Qwen in 1s, GPT-2 not at all), runs of spaces and of newlines
          ("'", "s"), ("'", "S"), ("1", "2"), ("12", "3"), ("Ġ", "Ġ"), ("Ċ", "Ċ")]

# (content, special) after the BPE vocabulary, or (for mistral) before it
SPECIALS = {
    "llama": [("<|begin_of_text|>", True), ("<|end_of_text|>", True),
              ("<|start_header_id|>", True), ("<|end_header_id|>", True), ("<|eot_id|>", True)],
    "mistral": [("<unk>", True), ("<s>", True), ("</s>", True)],
    "qwen2": [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True)],
    "qwen3": [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
              ("<think>", False), ("</think>", False)],
}


def bytes_to_unicode():
    """GPT-2's byte -> printable character table, in its order (id order of the byte tokens)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def byte_level(add_prefix_space, trim_offsets, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


def split(regex):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def template(bos, bos_id):
    """TemplateProcessing that puts bos before each sequence (Llama 3's, Llama 2's)."""
    sp = {"SpecialToken": {"id": bos, "type_id": 0}}
    return {"type": "TemplateProcessing",
            "single": [sp, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [sp, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}


def make_tokenizer(family, merges_as_pairs):
    """Returns (tokenizer.json object, {added token content: id}, number of tokens)."""
    specials = SPECIALS[family]
    vocab = {}
    if family == "mistral":        # Llama 2's / Mistral's <unk> <s> </s> come first, in both lists
        for content, _ in specials:
            vocab[content] = len(vocab)
    for ch in bytes_to_unicode():
        vocab[ch] = len(vocab)
    for a, b in MERGES:
        assert a in vocab and b in vocab and a + b not in vocab, (a, b)
        vocab[a + b] = len(vocab)
    base = 0 if family == "mistral" else len(vocab)
    added, ids = [], {}
    for i, (content, special) in enumerate(specials):
        ids[content] = base + i
        added.append({"id": base + i, "content": content, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": special})
    n_tokens = len(vocab) + (0 if family == "mistral" else len(specials))
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": family == "llama",
             "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])),
             "merges": [[a, b] for a, b in MERGES] if merges_as_pairs
             else ["%s %s" % (a, b) for a, b in MERGES]}
    if family == "llama":          # Llama 3
        normalizer = None
        pre = {"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX),
                                                     byte_level(False, True, False)]}
        post = {"type": "Sequence", "processors": [byte_level(True, False, True),
                                                   template("<|begin_of_text|>",
                                                            ids["<|begin_of_text|>"])]}
    elif family == "mistral":      # GPT-2's byte-level pre-tokenizer, Llama 2's BOS template
        normalizer = None
        pre = byte_level(False, True, True)
        post = template("<s>", ids["<s>"])
    else:                          # Qwen2 / Qwen2.5 / Qwen3
        normalizer = {"type": "NFC"}
        pre = {"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX),
                                                     byte_level(False, False, False)]}
        post = byte_level(False, False, False)
    decoder = byte_level(False, False, False) if family.startswith("qwen") \
        else byte_level(True, True, True)
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
           "decoder": decoder, "model": model}
    return tok, ids, n_tokens


def tokenizer_config(family, ids, ctx):
    decoder = {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                        "single_word": False, "special": special}
               for (c, i), special in zip(sorted(ids.items(), key=lambda kv: kv[1]),
                                          [s for _, s in SPECIALS[family]])}
    tc = {"added_tokens_decoder": decoder, "clean_up_tokenization_spaces": False,
          "model_max_length": ctx}
    if family == "llama":
        tc.update(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                  model_input_names=["input_ids", "attention_mask"],
                  tokenizer_class="PreTrainedTokenizerFast")
    elif family == "mistral":
        tc.update(add_bos_token=True, add_eos_token=False, bos_token="<s>", eos_token="</s>",
                  unk_token="<unk>", pad_token=None, tokenizer_class="PreTrainedTokenizerFast")
    else:
        tc.update(add_prefix_space=False, bos_token=None, eos_token="<|im_end|>", errors="replace",
                  pad_token="<|endoftext|>", split_special_tokens=False,
                  tokenizer_class="Qwen2Tokenizer")
    return tc


# --------------------------------------------------------------------------------------------
# config

def make_config(a, family, ids, V):
    D = a.head_dim or a.hidden // a.heads
    torch_dtype = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[a.file_dtype]
    c = {"attention_dropout": 0.0, "hidden_act": "silu", "hidden_size": a.hidden,
         "initializer_range": 0.02, "intermediate_size": a.inter,
         "max_position_embeddings": a.ctx, "model_type": family,
         "num_attention_heads": a.heads, "num_hidden_layers": a.layers,
         "num_key_value_heads": a.kv_heads, "tie_word_embeddings": not a.untied,
         "torch_dtype": torch_dtype, "transformers_version": transformers_version(family),
         "use_cache": True, "vocab_size": V}
    if family == "llama":
        eos = [ids["<|end_of_text|>"], ids["<|eot_id|>"]] if a.eos_list else ids["<|end_of_text|>"]
        c.update(architectures=["LlamaForCausalLM"], attention_bias=a.attention_bias,
                 bos_token_id=ids["<|begin_of_text|>"], eos_token_id=eos, head_dim=D,
                 mlp_bias=False, pretraining_tp=1, rms_norm_eps=1e-05, rope_theta=float(a.theta),
                 rope_scaling=None)
        if a.rope_llama3:
            f, lo, hi, orig = a.rope_llama3.split(",")
            c["rope_scaling"] = {"factor": float(f), "low_freq_factor": float(lo),
                                 "high_freq_factor": float(hi),
                                 "original_max_position_embeddings": int(orig),
                                 "rope_type": "llama3"}
    elif family == "mistral":
        c.update(architectures=["MistralForCausalLM"], bos_token_id=ids["<s>"],
                 eos_token_id=ids["</s>"], head_dim=D, rms_norm_eps=1e-05,
                 rope_theta=float(a.theta), sliding_window=a.sliding_window)
    elif family == "qwen2":        # Qwen2.5's config.json has no head_dim
        c.update(architectures=["Qwen2ForCausalLM"], bos_token_id=ids["<|endoftext|>"],
                 eos_token_id=ids["<|endoftext|>"], max_window_layers=a.layers,
                 rms_norm_eps=1e-06, rope_theta=float(a.theta), sliding_window=a.ctx,
                 use_sliding_window=False)
    else:
        c.update(architectures=["Qwen3ForCausalLM"], attention_bias=a.attention_bias,
                 bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], head_dim=D,
                 max_window_layers=a.layers, rms_norm_eps=1e-06, rope_scaling=None,
                 rope_theta=int(a.theta), sliding_window=None, use_sliding_window=False)
    return c


def generation_config(family, ids):
    if family == "llama":
        g = {"bos_token_id": ids["<|begin_of_text|>"],
             "eos_token_id": [ids["<|end_of_text|>"], ids["<|eot_id|>"]],
             "do_sample": True, "temperature": 0.6, "top_p": 0.9}
    elif family == "mistral":
        g = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]}
    else:
        g = {"bos_token_id": ids["<|endoftext|>"],
             "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
             "pad_token_id": ids["<|endoftext|>"], "do_sample": True, "temperature": 0.7,
             "top_k": 20, "top_p": 0.8}
    g["_from_model_config"] = False
    g["transformers_version"] = transformers_version(family)
    return g


# --------------------------------------------------------------------------------------------
# weights

# o_proj and down_proj write into the residual stream: with gain 1 the token's own embedding
# dominates it and a tied model only repeats its last token; gain 4 lets the layers decide.
OUT_GAIN = 4.0
EMBED_STD = 0.4

def make_weights(a, family, V, n_tokens, rng):
    """The state dict in nn.Module order: [(name, float64 array)]. Rows past the tokenizer's
    n_tokens (Qwen's padding of vocab_size) are small, as untrained rows are: never the argmax."""
    C, H, KV, F = a.hidden, a.heads, a.kv_heads, a.inter
    D = a.head_dim or C // H
    normal = lambda std, *shape: rng.normal(0.0, std, shape)
    lin = lambda out, inp, gain=1.0: normal(gain / np.sqrt(inp), out, inp)
    norm = lambda n: 1.0 + rng.uniform(-0.1, 0.1, n)
    qkv_bias = family == "qwen2" or (family in ("llama", "qwen3") and a.attention_bias)
    o_bias = family in ("llama", "qwen3") and a.attention_bias
    def vocab_rows():
        t = normal(EMBED_STD, V, C)
        t[n_tokens:] *= 0.02 / EMBED_STD
        return t
    sd = [("model.embed_tokens.weight", vocab_rows())]
    for i in range(a.layers):
        p = "model.layers.%d." % i
        for proj, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            sd.append((p + "self_attn.%s_proj.weight" % proj, lin(rows, C)))
            if qkv_bias:
                sd.append((p + "self_attn.%s_proj.bias" % proj, normal(0.2, rows)))
        sd.append((p + "self_attn.o_proj.weight", lin(C, H * D, OUT_GAIN)))
        if o_bias:
            sd.append((p + "self_attn.o_proj.bias", normal(0.2, C)))
        if family == "qwen3":
            sd.append((p + "self_attn.q_norm.weight", norm(D)))
            sd.append((p + "self_attn.k_norm.weight", norm(D)))
        sd.append((p + "mlp.gate_proj.weight", lin(F, C)))
        sd.append((p + "mlp.up_proj.weight", lin(F, C)))
        sd.append((p + "mlp.down_proj.weight", lin(C, F, OUT_GAIN)))
        sd.append((p + "input_layernorm.weight", norm(C)))
        sd.append((p + "post_attention_layernorm.weight", norm(C)))
    sd.append(("model.norm.weight", norm(C)))
    if a.untied:
        sd.append(("lm_head.weight", vocab_rows()))
    return sd


def encode(t, file_dtype):
    """(safetensors dtype, little-endian bytes) of a float64 array."""
    if file_dtype == "f32":
        return "F32", t.astype("<f4").tobytes()
    if file_dtype == "f16":
        return "F16", t.astype(np.float32).astype("<f2").tobytes()
    bits = round_bf16(t).astype(np.float32).view(np.uint32) >> 16
    return "BF16", bits.astype("<u2").tobytes()


def write_safetensors(path, tensors):
    """tensors: [(name, dtype, shape, bytes)]; written sorted by name as safetensors does."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dt, shape, raw in sorted(tensors):
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def write_weights(d, sd, file_dtype, shards):
    enc = [(name, *encode(t, file_dtype), t.shape) for name, t in sd]
    enc = [(name, dt, shape, raw) for name, dt, raw, shape in enc]
    if shards <= 1:
        write_safetensors(os.path.join(d, "model.safetensors"), enc)
        return
    total = sum(len(e[3]) for e in enc)
    parts, start = [[] for _ in range(shards)], 0
    for e in enc:                  # state-dict order; a tensor goes where its first byte falls
        parts[min(shards - 1, start * shards // total)].append(e)
        start += len(e[3])
    parts = [p for p in parts if p]
    weight_map = {}
    for k, p in enumerate(parts):
        fname = "model-%05d-of-%05d.safetensors" % (k + 1, len(parts))
        write_safetensors(os.path.join(d, fname), p)
        for e in p:
            weight_map[e[0]] = fname
    write_json(os.path.join(d, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


# --------------------------------------------------------------------------------------------
# main

def write_json(path, obj, sort_keys=True):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--type", required=True, choices=["llama", "mistral", "qwen2", "qwen3"])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, help="default hidden / heads")
    ap.add_argument("--inter", type=int, default=96)
    ap.add_argument("--ctx", type=int, default=128, help="max_position_embeddings")
    ap.add_argument("--theta", type=float, default=10000.0, help="rope_theta")
    ap.add_argument("--file-dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--untied", action="store_true", help="a separate lm_head.weight")
    ap.add_argument("--attention-bias", action="store_true", help="llama/qwen3 attention_bias")
    ap.add_argument("--rope-llama3", help="FACTOR,LOW,HIGH,ORIGINAL_MAX (llama only)")
    ap.add_argument("--sliding-window", type=int, help="mistral's sliding_window (default null)")
    ap.add_argument("--vocab-pad", type=int, help="vocab_size above the tokenizer's (as Qwen's)")
    ap.add_argument("--eos-list", action="store_true", help="llama: config.json eos_token_id a list")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--merges-as-pairs", action="store_true", help='merges as ["a", "b"]')
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    if a.heads % a.kv_heads:
        ap.error("--kv-heads %d does not divide --heads %d" % (a.kv_heads, a.heads))
    if a.rope_llama3 and a.type != "llama":
        ap.error("--rope-llama3 is for --type llama")
    tok, ids, n_tokens = make_tokenizer(a.type, a.merges_as_pairs)
    V = a.vocab_pad or n_tokens
    if V < n_tokens:
        ap.error("--vocab-pad %d is below the tokenizer's %d tokens" % (V, n_tokens))
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    write_json(os.path.join(a.dir, "config.json"), make_config(a, a.type, ids, V))
    write_json(os.path.join(a.dir, "generation_config.json"), generation_config(a.type, ids))
    write_json(os.path.join(a.dir, "tokenizer.json"), tok, sort_keys=False)
    write_json(os.path.join(a.dir, "tokenizer_config.json"), tokenizer_config(a.type, ids, a.ctx))
    write_weights(a.dir, make_weights(a, a.type, V, n_tokens, rng), a.file_dtype, a.shards)
    print("%s: %s, V %d (%d tokenizer tokens), %s" % (a.dir, a.type, V, n_tokens, a.file_dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
