#!/usr/bin/python3
"""tiny_hf.py: writes a tiny random Hugging Face model directory of the llama, qwen2 or qwen3
architecture (config.json, model.safetensors in F32, tokenizer.json, tokenizer_config.json), the
input hf_to_gguf.py turns into the committed GGUF fixtures. /usr/bin/python3 and numpy only.

    tiny_hf.py OUT_DIR --arch llama|qwen2|qwen3 [--seed N] [--hidden C] [--layers L]
                       [--heads NH] [--kv-heads NKV] [--ff FF] [--tokenizer spm|bpe]

Tokenizers: "spm" is a SentencePiece-style BPE with byte fallback (<unk>, <s>, </s>, 256 <0xNN>
byte tokens, then pieces with U+2581 for spaces, as TinyLlama and Llama 2 ship it); "bpe" is a
byte-level BPE (GPT-2's byte-to-unicode alphabet, merges, special tokens), as Llama 3 and Qwen
ship it. Both carry a few merges over common English so text tokenizes into more than bytes.
"""

import json
import os
import struct
import sys

import numpy as np

WORDS = ["the", "and", "to", "of", "in", "is", "that", "it", "he", "was", "for", "on", "are",
         "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had"]


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def merges_for(words, space):
    """Merges building each of words (prefixed by space) left to right, and the new pieces."""
    merges, pieces = [], []
    for w in words:
        cur = space + w if space else w
        left = cur[0]
        for ch in cur[1:]:
            m = (left, ch)
            left = left + ch
            if m not in merges:
                merges.append(m)
                pieces.append(left)
    return merges, pieces


def bpe_tokenizer(specials):
    b2u = bytes_to_unicode()
    vocab = {}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges, pieces = merges_for(WORDS, b2u[ord(" ")])
    for p in pieces:
        if p not in vocab:
            vocab[p] = len(vocab)
    added = []
    for s in specials:
        added.append({"id": len(vocab) + len(added), "content": s, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    tj = {"version": "1.0", "added_tokens": added, "normalizer": None,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                            "use_regex": True},
          "decoder": {"type": "ByteLevel"},
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                    "vocab": vocab, "merges": [" ".join(m) for m in merges]}}
    return tj, len(vocab) + len(added)


def spm_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    merges, pieces = merges_for(WORDS, "\u2581")
    for ch in sorted(set("".join(WORDS)) | {"\u2581"}):
        vocab.setdefault(ch, len(vocab))
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(["<unk>", "<s>", "</s>"])]
    tj = {"version": "1.0", "added_tokens": added,
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Prepend", "prepend": "\u2581"},
              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
          "pre_tokenizer": None,
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "byte_fallback": True,
                    "fuse_unk": True, "vocab": vocab, "merges": [" ".join(m) for m in merges]}}
    return tj, len(vocab)


def save_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    args = sys.argv[1:]
    opts = {"--arch": "llama", "--seed": "1", "--hidden": "32", "--layers": "2", "--heads": "4",
            "--kv-heads": "2", "--ff": "64", "--tokenizer": None}
    for o in list(opts):
        if o in args:
            i = args.index(o)
            opts[o] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 1 or opts["--arch"] not in ("llama", "qwen2", "qwen3"):
        sys.exit(__doc__)
    out = args[0]
    arch = opts["--arch"]
    C, L, NH, NKV, FF = (int(opts[k]) for k in ("--hidden", "--layers", "--heads", "--kv-heads",
                                                  "--ff"))
    HS = C // NH
    tok = opts["--tokenizer"] or ("spm" if arch == "llama" else "bpe")
    if tok == "spm":
        tj, V = spm_tokenizer()
        bos, eos, tc = 1, 2, {"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>",
                              "chat_template": "{% for message in messages %}{{ '<|' + "
                              "message['role'] + '|>\\n' + message['content'] + eos_token }}"
                              "{% endfor %}"}
    elif arch == "llama":
        tj, V = bpe_tokenizer(["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
        bos, eos, tc = V - 3, V - 2, {"bos_token": "<|begin_of_text|>"}
    else:
        tj, V = bpe_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        bos, eos, tc = None, V - 3, {"add_bos_token": False,
                                     "chat_template": "{% for m in messages %}<|im_start|>"
                                     "{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"}
    rng = np.random.default_rng(int(opts["--seed"]))

    def w(*shape):
        return rng.normal(0, 0.5, size=shape).astype(np.float32)

    t = {"model.embed_tokens.weight": w(V, C), "model.norm.weight": 1 + 0.1 * w(C)}
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = 1 + 0.1 * w(C)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.1 * w(C)
        t[p + "self_attn.q_proj.weight"] = w(NH * HS, C)
        t[p + "self_attn.k_proj.weight"] = w(NKV * HS, C)
        t[p + "self_attn.v_proj.weight"] = w(NKV * HS, C)
        t[p + "self_attn.o_proj.weight"] = w(C, NH * HS)
        if arch == "qwen2":
            t[p + "self_attn.q_proj.bias"] = w(NH * HS)
            t[p + "self_attn.k_proj.bias"] = w(NKV * HS)
            t[p + "self_attn.v_proj.bias"] = w(NKV * HS)
        if arch == "qwen3":
            t[p + "self_attn.q_norm.weight"] = 1 + 0.1 * w(HS)
            t[p + "self_attn.k_norm.weight"] = 1 + 0.1 * w(HS)
        t[p + "mlp.gate_proj.weight"] = w(FF, C)
        t[p + "mlp.up_proj.weight"] = w(FF, C)
        t[p + "mlp.down_proj.weight"] = w(C, FF)
    tied = arch != "llama"
    if not tied:
        t["lm_head.weight"] = w(V, C)
    cfg = {"architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                              "qwen3": "Qwen3ForCausalLM"}[arch]],
           "model_type": arch, "vocab_size": V, "hidden_size": C, "intermediate_size": FF,
           "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV,
           "head_dim": HS, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0 if arch == "llama" else 1000000.0,
           "tie_word_embeddings": tied, "torch_dtype": "float32", "eos_token_id": eos}
    if bos is not None:
        cfg["bos_token_id"] = bos
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False)
    save_safetensors(os.path.join(out, "model.safetensors"), t)
    print(f"{out}: {arch}, V {V}, C {C}, L {L}, NH {NH}, NKV {NKV}, FF {FF}, tokenizer {tok}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
