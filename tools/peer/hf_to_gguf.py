#!/usr/bin/python3
"""hf_to_gguf.py: writes a Hugging Face model directory as a GGUF v3 file llama.cpp can load.

Offline tool for fixtures and peer comparisons: only /usr/bin/python3 and numpy, never run by make.

    hf_to_gguf.py HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0] [--pre NAME]

Architectures (config.json "model_type"):
  gpt2                    config.json, model.safetensors, vocab.json, merges.txt (what
                          build/tools/mkmodel or tools/download_gpt2.sh write)
  llama, mistral          -> GGUF "llama"; q_proj/k_proj rows permuted as llama.cpp's converter
                          does (HF keeps rotary halves [x0..x(d/2-1) | x(d/2)..], GGUF adjacent
                          pairs), rope_freqs written for rope_scaling rope_type "llama3"
  qwen2                   -> "qwen2" (q/k/v biases), no permutation
  qwen3                   -> "qwen3" (q_norm/k_norm), no permutation
Tokenizers: vocab.json + merges.txt (GPT-2), or tokenizer.json: a byte-level BPE
(tokenizer.ggml.model "gpt2", merges, tokenizer.ggml.pre from --pre or the architecture:
llama-bpe, qwen2, gpt-2), or a SentencePiece-style BPE with byte fallback ("llama": scores,
token types, <0xNN> byte tokens); a tokenizer.model (SentencePiece protobuf) beside it supplies
the exact scores and types, as llama.cpp reads them. tokenizer_config.json's chat_template and
add_bos_token are copied.
--outtype: f32; f16 (matrices F16, 1-D tensors F32, as llama.cpp's converter); bf16 (the same in
BF16, rounded to nearest even); q8_0 (matrices whose
rows are whole 32-weight blocks quantized as ggml's quantize_row_q8_0_ref does; the rest F16/F32).
The layout follows llama.cpp's converter: names blk.N.attn_q.weight etc., ggml dims in reverse
(ne[0] is the row length), lm_head left out when tied to the embeddings.
"""

import json
import math
import os
import struct
import sys

import numpy as np

# --------------------------------------------------------------------------------------------
# GGUF constants (gguf.h / docs/gguf.md)

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

(T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY,
 T_UINT64, T_INT64, T_FLOAT64) = range(13)
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
GGML_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q8_0: (32, 34), GGML_BF16: (1, 2)}
# llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_BF16
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

# --------------------------------------------------------------------------------------------
# GGUF writing (also used by tests/fuzz/make_seeds.py)


def pack_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


SCALAR = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
          T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
          T_FLOAT64: "<d"}


def pack_value(vtype, value):
    if vtype == T_STRING:
        return pack_string(value)
    if vtype == T_ARRAY:
        etype, items = value
        out = struct.pack("<IQ", etype, len(items))
        if etype == T_STRING:
            return out + b"".join(pack_string(s) for s in items)
        return out + b"".join(struct.pack(SCALAR[etype], v) for v in items)
    return struct.pack(SCALAR[vtype], value)


def pack_kv(key, vtype, value):
    return pack_string(key) + struct.pack("<I", vtype) + pack_value(vtype, value)


def gguf_bytes(kvs, tensors, alignment=ALIGNMENT, version=GGUF_VERSION):
    """kvs: [(key, type, value)]; tensors: [(name, ne (ggml order), ggml_type, raw bytes)].
    Returns the whole file; each tensor's data padded to the alignment."""
    out = [GGUF_MAGIC + struct.pack("<IQQ", version, len(tensors), len(kvs))]
    out += [pack_kv(*kv) for kv in kvs]
    offset, datas = 0, []
    for name, ne, gtype, raw in tensors:
        out.append(pack_string(name) + struct.pack("<I", len(ne)) +
                   struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", gtype, offset))
        pad = -len(raw) % alignment
        datas.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head = b"".join(out)
    head += b"\0" * (-len(head) % alignment)
    return head + b"".join(datas)


def quantize_q8_0(arr):
    """ggml's quantize_row_q8_0_ref over each row: per 32 weights d = max|x| / 127 (stored fp16),
    q = round(x / d) half away from zero (the division uses the fp32 d, not the rounded one)."""
    x = np.ascontiguousarray(arr, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = amax / np.float32(127)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    blocks = np.empty((x.shape[0], 34), dtype=np.uint8)
    blocks[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = q.view(np.uint8)
    return blocks.tobytes()


def tensor_data(arr, gtype):
    if gtype == GGML_F32:
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if gtype == GGML_F16:
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if gtype == GGML_BF16:
        return bf16_bits(arr).astype("<u2").tobytes()
    return quantize_q8_0(arr)


def bf16_bits(arr):
    """fp32 rounded to bf16 (to nearest, ties to even; NaN kept quiet), as llama.cpp's
    ggml_fp32_to_bf16 does."""
    u = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    nan = (u & 0x7fffffff) > 0x7f800000
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint32)
    return r.astype(np.uint16)


# --------------------------------------------------------------------------------------------
# safetensors reading


def safetensors_load(path):
    """Returns {name: float32 ndarray} for every tensor of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a:base + b]
        dt = info["dtype"]
        if dt == "F32":
            arr = buf.view(np.float32)
        elif dt == "F16":
            arr = buf.view(np.float16).astype(np.float32)
        elif dt == "BF16":
            arr = (buf.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            sys.exit(f"{path}: tensor {name}: dtype {dt} not supported")
        out[name] = arr.reshape(info["shape"])
    return out


def load_weights(hf_dir):
    """model.safetensors, or the shards a model.safetensors.index.json names."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        st = {}
        for name in files:
            st.update(safetensors_load(os.path.join(hf_dir, name)))
        return st
    return safetensors_load(os.path.join(hf_dir, "model.safetensors"))


# --------------------------------------------------------------------------------------------
# tensor mapping: HF names -> llama.cpp names


def gpt2_map_tensors(st, cfg):
    """Yields (gguf_name, ndarray) in llama.cpp's order; HF Conv1D weights transposed."""
    def get(name):
        for key in ("transformer." + name, name):
            if key in st:
                return st[key]
        sys.exit(f"model.safetensors: tensor {name} missing")

    yield "token_embd.weight", get("wte.weight")              # (V, C) -> ne [C, V]
    yield "position_embd.weight", get("wpe.weight")           # (maxT, C)
    for l in range(cfg["n_layer"]):
        h = f"h.{l}."
        b = f"blk.{l}."
        yield b + "attn_norm.weight", get(h + "ln_1.weight")
        yield b + "attn_norm.bias", get(h + "ln_1.bias")
        yield b + "attn_qkv.weight", get(h + "attn.c_attn.weight").T      # (C, 3C) -> (3C, C)
        yield b + "attn_qkv.bias", get(h + "attn.c_attn.bias")
        yield b + "attn_output.weight", get(h + "attn.c_proj.weight").T
        yield b + "attn_output.bias", get(h + "attn.c_proj.bias")
        yield b + "ffn_norm.weight", get(h + "ln_2.weight")
        yield b + "ffn_norm.bias", get(h + "ln_2.bias")
        yield b + "ffn_up.weight", get(h + "mlp.c_fc.weight").T           # (C, FF) -> (FF, C)
        yield b + "ffn_up.bias", get(h + "mlp.c_fc.bias")
        yield b + "ffn_down.weight", get(h + "mlp.c_proj.weight").T       # (FF, C) -> (C, FF)
        yield b + "ffn_down.bias", get(h + "mlp.c_proj.bias")
    yield "output_norm.weight", get("ln_f.weight")
    yield "output_norm.bias", get("ln_f.bias")
    if "lm_head.weight" in st:
        lm = st["lm_head.weight"]
        if not np.array_equal(lm, get("wte.weight")):
            yield "output.weight", lm


def permute_rotary(w, n_head):
    """llama.cpp's LlamaModel.permute: within each head, rows [0..d/2) and [d/2..d) (HF's rotate-
    half order) become interleaved pairs (0, d/2), (1, d/2+1), ... (GGUF's adjacent pairs)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
             .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_factors(cfg, head_dim):
    """llama.cpp's rope_freqs for rope_scaling rope_type llama3 (one factor per rotary pair)."""
    rs = cfg["rope_scaling"]
    base = cfg.get("rope_theta", 10000.0)
    factor = rs.get("factor", 8.0)
    low, high = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old_ctx = rs.get("original_max_position_embeddings", 8192)
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def llama_map_tensors(st, cfg, arch):
    """Yields (gguf_name, ndarray) for llama, qwen2 and qwen3 checkpoints."""
    def get(name, required=True):
        if name in st:
            return st[name]
        if required:
            sys.exit(f"model.safetensors: tensor {name} missing")
        return None

    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads") or n_head
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    rs = cfg.get("rope_scaling") or {}
    if arch == "llama" and rs.get("rope_type", rs.get("type")) == "llama3":
        yield "rope_freqs.weight", llama3_rope_factors(cfg, head_dim)
    yield "token_embd.weight", get("model.embed_tokens.weight")
    for l in range(cfg["num_hidden_layers"]):
        h, b = f"model.layers.{l}.", f"blk.{l}."
        q = get(h + "self_attn.q_proj.weight")
        k = get(h + "self_attn.k_proj.weight")
        if arch == "llama":
            q, k = permute_rotary(q, n_head), permute_rotary(k, n_kv)
        yield b + "attn_norm.weight", get(h + "input_layernorm.weight")
        yield b + "attn_q.weight", q
        yield b + "attn_k.weight", k
        yield b + "attn_v.weight", get(h + "self_attn.v_proj.weight")
        for x in "qkv":
            bias = get(h + f"self_attn.{x}_proj.bias", required=(arch == "qwen2"))
            if bias is not None:
                if arch == "llama" and x in "qk":
                    bias = permute_rotary(bias, n_head if x == "q" else n_kv)
                yield b + f"attn_{x}.bias", bias
        if arch == "qwen3":
            yield b + "attn_q_norm.weight", get(h + "self_attn.q_norm.weight")
            yield b + "attn_k_norm.weight", get(h + "self_attn.k_norm.weight")
        yield b + "attn_output.weight", get(h + "self_attn.o_proj.weight")
        yield b + "ffn_norm.weight", get(h + "post_attention_layernorm.weight")
        yield b + "ffn_gate.weight", get(h + "mlp.gate_proj.weight")
        yield b + "ffn_up.weight", get(h + "mlp.up_proj.weight")
        yield b + "ffn_down.weight", get(h + "mlp.down_proj.weight")
    yield "output_norm.weight", get("model.norm.weight")
    if not cfg.get("tie_word_embeddings", False) and "lm_head.weight" in st:
        yield "output.weight", st["lm_head.weight"]


def tensor_ggml_type(name, arr, outtype):
    """Mirrors llama.cpp's converter: 1-D tensors, norms, the position table and rope factors stay
    F32; q8_0 only where rows are whole blocks (the rest F16)."""
    if outtype == "f32" or arr.ndim <= 1 or name.endswith("_norm.weight"):
        return GGML_F32
    if name in ("position_embd.weight", "rope_freqs.weight"):
        return GGML_F32
    if outtype == "q8_0" and arr.shape[-1] % 32 == 0:
        return GGML_Q8_0
    if outtype == "bf16":
        return GGML_BF16
    return GGML_F16


# --------------------------------------------------------------------------------------------
# tokenizers


def gpt2_vocab_files(hf_dir):
    """Tokens in id order (byte-level strings, as vocab.json holds them), types, merges."""
    with open(f"{hf_dir}/vocab.json", encoding="utf-8") as f:
        vocab = json.load(f)
    tokens = [None] * len(vocab)
    for tok, i in vocab.items():
        tokens[i] = tok
    if any(t is None for t in tokens):
        sys.exit(f"{hf_dir}/vocab.json: ids are not 0..{len(vocab) - 1}")
    types = [TOKEN_CONTROL if t == "<|endoftext|>" else TOKEN_NORMAL for t in tokens]
    merges = []
    with open(f"{hf_dir}/merges.txt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#version"):
                merges.append(line)
    return tokens, types, merges


def sentencepiece_pieces(path):
    """(piece, score, type) from a SentencePiece ModelProto: field 1 repeated SentencePiece
    {1: piece, 2: score (float), 3: type (1 normal, 2 unknown, 3 control, 4 user defined,
    5 unused, 6 byte)}, read with a minimal protobuf walker."""
    data = open(path, "rb").read()

    def varint(buf, i):
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7f) << shift
            shift += 7
            if b < 0x80:
                return v, i

    def fields(buf):
        i = 0
        while i < len(buf):
            key, i = varint(buf, i)
            num, wire = key >> 3, key & 7
            if wire == 0:
                v, i = varint(buf, i)
            elif wire == 1:
                v, i = buf[i:i + 8], i + 8
            elif wire == 2:
                n, i = varint(buf, i)
                v, i = buf[i:i + n], i + n
            elif wire == 5:
                v, i = buf[i:i + 4], i + 4
            else:
                sys.exit(f"{path}: protobuf wire type {wire} not supported")
            yield num, v

    out = []
    for num, v in fields(data):
        if num != 1:
            continue
        piece, score, ptype = "", 0.0, 1
        for n2, v2 in fields(v):
            if n2 == 1:
                piece = v2.decode("utf-8")
            elif n2 == 2:
                score = struct.unpack("<f", v2)[0]
            elif n2 == 3:
                ptype = v2
        out.append((piece, score, ptype))
    return out


def tokenizer_json_vocab(hf_dir, cfg):
    """(model, tokens, types, scores, merges) from tokenizer.json (and tokenizer.model)."""
    with open(f"{hf_dir}/tokenizer.json", encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        sys.exit(f"{hf_dir}/tokenizer.json: model type {model.get('type')} not supported (BPE)")
    vocab = dict(model["vocab"])
    added = {t["content"]: t for t in tj.get("added_tokens", [])}
    for t in added.values():
        vocab.setdefault(t["content"], t["id"])
    n = max(vocab.values()) + 1
    n = max(n, cfg.get("vocab_size", n))
    tokens = [None] * n
    for tok, i in vocab.items():
        tokens[i] = tok
    spm = bool(model.get("byte_fallback"))
    types, scores = [], []
    for i, t in enumerate(tokens):
        if t is None:                       # padding rows of the embedding: llama.cpp's [PADn]
            tokens[i] = f"[PAD{i}]"
            types.append(TOKEN_UNUSED)
        elif t in added:
            types.append(TOKEN_CONTROL if added[t].get("special") else TOKEN_USER_DEFINED)
        elif spm and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(TOKEN_BYTE)
        elif spm and t == model.get("unk_token"):
            types.append(TOKEN_UNKNOWN)
        else:
            types.append(TOKEN_NORMAL)
        scores.append(-float(i))            # SentencePiece BPE: earlier pieces merge first
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    if not spm:
        return "gpt2", tokens, types, None, merges
    sp_path = f"{hf_dir}/tokenizer.model"
    if os.path.exists(sp_path):
        pieces = sentencepiece_pieces(sp_path)
        for i, (piece, score, ptype) in enumerate(pieces[:n]):
            tokens[i], scores[i], types[i] = piece, score, ptype
    return "llama", tokens, types, scores, None


def tokenizer_kvs(hf_dir, cfg, arch, pre):
    if os.path.exists(f"{hf_dir}/tokenizer.json"):
        tmodel, tokens, types, scores, merges = tokenizer_json_vocab(hf_dir, cfg)
    else:
        tmodel, scores = "gpt2", None
        tokens, types, merges = gpt2_vocab_files(hf_dir)
    tc = {}
    if os.path.exists(f"{hf_dir}/tokenizer_config.json"):
        with open(f"{hf_dir}/tokenizer_config.json", encoding="utf-8") as f:
            tc = json.load(f)
    kvs = [("tokenizer.ggml.model", T_STRING, tmodel)]
    if tmodel == "gpt2":
        if pre is None:
            pre = {"gpt2": "gpt-2", "llama": "llama-bpe", "qwen2": "qwen2", "qwen3": "qwen2"}[arch]
        kvs.append(("tokenizer.ggml.pre", T_STRING, pre))
    else:
        kvs.append(("tokenizer.ggml.pre", T_STRING, "default"))
    kvs.append(("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)))
    if scores is not None:
        kvs.append(("tokenizer.ggml.scores", T_ARRAY, (T_FLOAT32, scores)))
    kvs.append(("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)))
    if merges is not None:
        kvs.append(("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges)))

    def first(v):
        return v[0] if isinstance(v, list) else v
    eos = first(cfg.get("eos_token_id"))
    bos = first(cfg.get("bos_token_id"))
    if arch == "gpt2":
        eos = 50256 if eos is None else eos
        bos = eos if bos is None else bos
    if bos is not None:
        kvs.append(("tokenizer.ggml.bos_token_id", T_UINT32, bos))
    if eos is not None:
        kvs.append(("tokenizer.ggml.eos_token_id", T_UINT32, eos))
    if tmodel == "llama" and "<unk>" in tokens:
        kvs.append(("tokenizer.ggml.unknown_token_id", T_UINT32, tokens.index("<unk>")))
    add_bos = tc.get("add_bos_token", tmodel == "llama" or arch == "llama")
    if arch != "gpt2":
        kvs.append(("tokenizer.ggml.add_bos_token", T_BOOL, bool(add_bos)))
    if isinstance(tc.get("chat_template"), str):
        kvs.append(("tokenizer.chat_template", T_STRING, tc["chat_template"]))
    return kvs, len(tokens)


# --------------------------------------------------------------------------------------------
# hyperparameters


def gpt2_hparams(cfg):
    n_embd = cfg["n_embd"]
    return [
        ("gpt2.context_length", T_UINT32, cfg.get("n_positions", cfg.get("n_ctx"))),
        ("gpt2.embedding_length", T_UINT32, n_embd),
        ("gpt2.feed_forward_length", T_UINT32, cfg.get("n_inner") or 4 * n_embd),
        ("gpt2.block_count", T_UINT32, cfg["n_layer"]),
        ("gpt2.attention.head_count", T_UINT32, cfg["n_head"]),
        ("gpt2.attention.layer_norm_epsilon", T_FLOAT32, cfg.get("layer_norm_epsilon", 1e-5)),
    ]


def llama_hparams(cfg, arch):
    n_head = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    kvs = [
        (f"{arch}.context_length", T_UINT32, cfg.get("max_position_embeddings", 2048)),
        (f"{arch}.embedding_length", T_UINT32, cfg["hidden_size"]),
        (f"{arch}.block_count", T_UINT32, cfg["num_hidden_layers"]),
        (f"{arch}.feed_forward_length", T_UINT32, cfg["intermediate_size"]),
        (f"{arch}.rope.dimension_count", T_UINT32, head_dim),
        (f"{arch}.attention.head_count", T_UINT32, n_head),
        (f"{arch}.attention.head_count_kv", T_UINT32, cfg.get("num_key_value_heads") or n_head),
        (f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, cfg.get("rms_norm_eps", 1e-6)),
        (f"{arch}.rope.freq_base", T_FLOAT32, cfg.get("rope_theta", 10000.0)),
    ]
    if head_dim != cfg["hidden_size"] // n_head:
        kvs += [(f"{arch}.attention.key_length", T_UINT32, head_dim),
                (f"{arch}.attention.value_length", T_UINT32, head_dim)]
    rs = cfg.get("rope_scaling") or {}
    rtype = rs.get("rope_type", rs.get("type"))
    if rtype in ("linear", "yarn"):
        kvs += [(f"{arch}.rope.scaling.type", T_STRING, rtype),
                (f"{arch}.rope.scaling.factor", T_FLOAT32, rs["factor"])]
    elif rtype not in (None, "default", "llama3"):
        sys.exit(f"config.json: rope_scaling type {rtype} not supported")
    if arch == "llama":
        kvs.append((f"{arch}.vocab_size", T_UINT32, cfg["vocab_size"]))
    return kvs


ARCH = {"gpt2": "gpt2", "llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}


def main():
    args = sys.argv[1:]
    opts = {"--outtype": "f32", "--pre": None}
    for o in list(opts):
        if o in args:
            i = args.index(o)
            opts[o] = args[i + 1]
            del args[i:i + 2]
    outtype = opts["--outtype"]
    if len(args) != 2 or outtype not in FILE_TYPE:
        sys.exit("usage: hf_to_gguf.py HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0] [--pre NAME]")
    hf_dir, out_path = args

    with open(f"{hf_dir}/config.json") as f:
        cfg = json.load(f)
    arch = ARCH.get(cfg.get("model_type", "gpt2"))
    if arch is None:
        sys.exit(f"{hf_dir}/config.json: model_type {cfg.get('model_type')} not supported "
                 f"({', '.join(ARCH)})")
    st = load_weights(hf_dir)
    tok_kvs, n_vocab = tokenizer_kvs(hf_dir, cfg, arch, opts["--pre"])
    if n_vocab != cfg["vocab_size"]:
        sys.exit(f"{hf_dir}: {n_vocab} tokens, config.json vocab_size {cfg['vocab_size']}")
    name = os.path.basename(os.path.normpath(hf_dir))
    kvs = [("general.architecture", T_STRING, arch),
           ("general.name", T_STRING, name),
           ("general.file_type", T_UINT32, FILE_TYPE[outtype]),
           ("general.alignment", T_UINT32, ALIGNMENT)]
    if arch == "gpt2":
        kvs += gpt2_hparams(cfg)
        mapped = gpt2_map_tensors(st, cfg)
    else:
        kvs += llama_hparams(cfg, arch)
        mapped = llama_map_tensors(st, cfg, arch)
    kvs += tok_kvs

    tensors = []
    n_params = 0
    for tname, arr in mapped:
        gtype = tensor_ggml_type(tname, arr, outtype)
        ne = list(reversed(arr.shape))          # ggml ne[0] is the innermost axis
        tensors.append((tname, ne, gtype, tensor_data(arr, gtype)))
        n_params += arr.size
    kvs.insert(3, ("general.parameter_count", T_UINT64, n_params))
    with open(out_path, "wb") as f:
        f.write(gguf_bytes(kvs, tensors))
    print(f"{out_path}: {arch}, {len(tensors)} tensors, {outtype}, {n_vocab} tokens, "
          f"{n_params} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
