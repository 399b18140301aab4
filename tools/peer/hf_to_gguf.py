#!/usr/bin/python3
"""hf_to_gguf.py: writes a Hugging Face GPT-2 directory as a GGUF v3 file llama.cpp can load.

Offline peer-comparison tool: only /usr/bin/python3 and numpy, never run by make.

    hf_to_gguf.py HF_DIR OUT.gguf [--outtype f32|f16]

HF_DIR holds config.json, model.safetensors, vocab.json and merges.txt (what
build/tools/mkmodel or tools/download_gpt2.sh write). The layout follows llama.cpp's
own converter for the gpt2 architecture: Conv1D weights ([in, out] in HF) are stored
transposed, 1-D tensors and the position table stay F32, the tied lm_head is left out
(llama.cpp then reads token_embd.weight for the output projection).
"""

import json
import struct
import sys

import numpy as np

# --------------------------------------------------------------------------------------------
# GGUF constants (gguf.h / docs/gguf.md)

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1
FILE_TYPE = {"f32": 0, "f16": 1}           # llama_ftype: ALL_F32, MOSTLY_F16
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3         # llama_token_type

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


# --------------------------------------------------------------------------------------------
# tensor mapping: HF GPT-2 names -> llama.cpp gpt2 names


def gpt2_map_tensors(st, n_layer):
    """Yields (gguf_name, ndarray) in llama.cpp's order; HF Conv1D weights transposed."""
    def get(name):
        for key in ("transformer." + name, name):
            if key in st:
                return st[key]
        sys.exit(f"model.safetensors: tensor {name} missing")

    yield "token_embd.weight", get("wte.weight")              # (V, C) -> ne [C, V]
    yield "position_embd.weight", get("wpe.weight")           # (maxT, C)
    for l in range(n_layer):
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


def tensor_ggml_type(name, arr, outtype):
    """Mirrors llama.cpp's converter: 1-D, norms and the position table stay F32."""
    if outtype == "f32" or arr.ndim <= 1 or name.endswith("_norm.weight"):
        return GGML_F32
    if name == "position_embd.weight":
        return GGML_F32
    return GGML_F16


# --------------------------------------------------------------------------------------------
# GGUF writing


def pack_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def pack_kv(key, vtype, value):
    out = pack_string(key) + struct.pack("<I", vtype)
    if vtype == T_UINT32:
        out += struct.pack("<I", value)
    elif vtype == T_FLOAT32:
        out += struct.pack("<f", value)
    elif vtype == T_STRING:
        out += pack_string(value)
    elif vtype == T_ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == T_STRING:
            out += b"".join(pack_string(s) for s in items)
        elif etype == T_INT32:
            out += np.asarray(items, dtype="<i4").tobytes()
        else:
            raise ValueError(f"array element type {etype}")
    else:
        raise ValueError(f"value type {vtype}")
    return out


def gpt2_vocab(hf_dir):
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


def main():
    args = sys.argv[1:]
    outtype = "f32"
    if "--outtype" in args:
        i = args.index("--outtype")
        outtype = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2 or outtype not in FILE_TYPE:
        sys.exit("usage: hf_to_gguf.py HF_DIR OUT.gguf [--outtype f32|f16]")
    hf_dir, out_path = args

    with open(f"{hf_dir}/config.json") as f:
        cfg = json.load(f)
    n_layer, n_embd = cfg["n_layer"], cfg["n_embd"]
    n_ff = cfg.get("n_inner") or 4 * n_embd
    n_ctx = cfg.get("n_positions", cfg.get("n_ctx"))
    st = safetensors_load(f"{hf_dir}/model.safetensors")
    tokens, types, merges = gpt2_vocab(hf_dir)
    if len(tokens) != cfg["vocab_size"]:
        sys.exit(f"{hf_dir}/vocab.json: {len(tokens)} tokens, config.json vocab_size {cfg['vocab_size']}")
    eos = cfg.get("eos_token_id", 50256)
    bos = cfg.get("bos_token_id", eos)

    kvs = [
        ("general.architecture", T_STRING, "gpt2"),
        ("general.name", T_STRING, "tokentop-peer-gpt2"),
        ("general.file_type", T_UINT32, FILE_TYPE[outtype]),
        ("general.alignment", T_UINT32, ALIGNMENT),
        ("gpt2.context_length", T_UINT32, n_ctx),
        ("gpt2.embedding_length", T_UINT32, n_embd),
        ("gpt2.feed_forward_length", T_UINT32, n_ff),
        ("gpt2.block_count", T_UINT32, n_layer),
        ("gpt2.attention.head_count", T_UINT32, cfg["n_head"]),
        ("gpt2.attention.layer_norm_epsilon", T_FLOAT32, cfg.get("layer_norm_epsilon", 1e-5)),
        ("tokenizer.ggml.model", T_STRING, "gpt2"),
        ("tokenizer.ggml.pre", T_STRING, "gpt-2"),
        ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
        ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
        ("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges)),
        ("tokenizer.ggml.bos_token_id", T_UINT32, bos),
        ("tokenizer.ggml.eos_token_id", T_UINT32, eos),
    ]

    # Tensor infos first (offsets relative to the aligned data section), then the data.
    tensors = []
    offset = 0
    for name, arr in gpt2_map_tensors(st, n_layer):
        gtype = tensor_ggml_type(name, arr, outtype)
        nbytes = arr.size * (4 if gtype == GGML_F32 else 2)
        tensors.append((name, arr, gtype, offset))
        offset += (nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT

    with open(out_path, "wb") as f:
        f.write(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kvs)))
        for kv in kvs:
            f.write(pack_kv(*kv))
        for name, arr, gtype, off in tensors:
            dims = list(reversed(arr.shape))            # ggml ne[0] is the innermost axis
            f.write(pack_string(name) + struct.pack("<I", len(dims)))
            f.write(struct.pack(f"<{len(dims)}Q", *dims))
            f.write(struct.pack("<IQ", gtype, off))
        f.write(b"\0" * (-f.tell() % ALIGNMENT))
        base = f.tell()
        for name, arr, gtype, off in tensors:
            f.write(b"\0" * (base + off - f.tell()))
            np_type = "<f4" if gtype == GGML_F32 else "<f2"
            f.write(np.ascontiguousarray(arr, dtype=np_type).tobytes())
        f.write(b"\0" * (-f.tell() % ALIGNMENT))
    print(f"{out_path}: {len(tensors)} tensors, {outtype}, {len(tokens)} tokens, "
          f"{len(merges)} merges", file=sys.stderr)


if __name__ == "__main__":
    main()
