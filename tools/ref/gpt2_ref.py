#!/usr/bin/python3
"""gpt2_ref.py: an independent float64 GPT-2 reference (numpy only) that writes golden logits.

It shares no code with tokentop: it parses the safetensors header with the json module, decodes
F32/F16/BF16 with numpy, binds the tensors by their Hugging Face names (with or without the
"transformer." prefix, lm_head tied to wte when absent), and runs GPT-2 on the whole sequence
without a cache, in float64:

    x = wte[ids] + wpe[0..T-1]
    per layer: h = LN(x); q,k,v = h @ c_attn.w + c_attn.b; causal softmax(q k^T / sqrt(HS)) v;
               x += (heads @ attn.c_proj.w + b); h = LN(x); x += gelu(h @ c_fc.w + b) @ mlp.c_proj.w + b
    logits = LN_f(x) @ lm_head^T

--dtype rounds every parameter (matrices, biases, LayerNorm, embeddings) to that precision first,
round-to-nearest-even as PyTorch's .half()/.bfloat16() do, which is how tokentop holds a model
loaded with --dtype; the arithmetic stays float64.

Usage:
  gpt2_ref.py MODEL_DIR --ids 1,2,3 [--dtype fp32|fp16|bf16] [--rows 0,5,-1] [--lens] [--out FILE]
  gpt2_ref.py MODEL_DIR --ids 1,2,3 --attention [--rows ...]   (attention golden, see below)
  gpt2_ref.py MODEL_DIR --fnv           (prints the FNV-1a 64 checksum of model.safetensors)

The output (tests/golden/*.txt) is a small text file:
  tokentop-golden 1
  model <name>
  safetensors_fnv1a64 <16 hex digits>
  dtype <held dtype>
  V <V>
  ids <n> <id> ...
  row <i> argmax <a> logits <V numbers>      (one line per requested row)

With --lens the file is a lens golden instead (tests/golden/lens-*.txt, tests/check_lens.c): the
first line says "tokentop-lens 1", and after the ids come
  L <layers>
  lens <l> argmax <a> probs <V numbers>      (l = 0 .. L: softmax(lm_head(LN_f(h_l))) of the
                                              last position, h_0 the embeddings, h_l block l's
                                              output; the last line is the model's distribution)
With --attention the row lines are replaced by the attention probabilities of each requested row
(the query at that position) in every layer and head (tests/golden/attn-*.txt):
  L <layers> NH <heads> NKV <kv heads>
  attn <row> <layer> <head> <kv head> <row + 1 probabilities over keys 0 .. row>
"""
import argparse
import json
import math
import os
import sys

import numpy as np


# --------------------------------------------------------------------------------------------
# safetensors

def fnv1a64(data):
    h = 0xcbf29ce484222325
    # numpy-vectorized FNV would be wrong (it is sequential); chunks keep Python's loop tolerable
    # for the small test models this is run on.
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h


def decode(raw, dtype, shape):
    if dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    elif dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2").astype(np.float64)
    elif dtype == "BF16":
        u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        a = u.view(np.float32).astype(np.float64)
    elif dtype == "F64":
        a = np.frombuffer(raw, dtype="<f8").astype(np.float64)
    else:
        return None
    return a.reshape(shape)


def read_safetensors(path, reject=None):
    """Returns ({name: float64 array}, the file's bytes). A tensor of a dtype decode() does not
    read is left out, or raised as reject(message) when reject is given."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = decode(data[b:e], info["dtype"], info["shape"])
        if t is None and reject:
            raise reject("%s: tensor %s: dtype %s is not F32, F16, BF16 or F64"
                         % (path, name, info["dtype"]))
        if t is not None:
            out[name] = t
    return out, blob


# --------------------------------------------------------------------------------------------
# rounding to the held dtype

def round_bf16(a):
    f = np.asarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    nan = np.isnan(f)
    u = (u + 0x7fff + ((u >> 16) & 1)) >> 16
    u = (u << 16).astype(np.uint32)
    r = u.view(np.float32).astype(np.float64)
    r[nan] = np.nan
    return r


def round_to(a, dtype):
    if dtype == "fp32":
        return np.asarray(a, dtype=np.float32).astype(np.float64)
    if dtype == "fp16":
        return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        return round_bf16(a)
    raise ValueError(dtype)


# --------------------------------------------------------------------------------------------
# GPT-2

def load_model(d, dtype):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    tensors, blob = read_safetensors(os.path.join(d, "model.safetensors"))

    def get(name):
        for key in (name, "transformer." + name):
            if key in tensors:
                return round_to(tensors[key], dtype)
        raise KeyError(name)

    L = cfg["n_layer"]
    w = {
        "wte": get("wte.weight"), "wpe": get("wpe.weight"),
        "ln_f_w": get("ln_f.weight"), "ln_f_b": get("ln_f.bias"),
        "h": [],
    }
    w["lm_head"] = round_to(tensors["lm_head.weight"], dtype) if "lm_head.weight" in tensors \
        else w["wte"]
    for i in range(L):
        p = "h.%d." % i
        w["h"].append({k: get(p + n) for k, n in [
            ("ln_1_w", "ln_1.weight"), ("ln_1_b", "ln_1.bias"),
            ("attn_w", "attn.c_attn.weight"), ("attn_b", "attn.c_attn.bias"),
            ("proj_w", "attn.c_proj.weight"), ("proj_b", "attn.c_proj.bias"),
            ("ln_2_w", "ln_2.weight"), ("ln_2_b", "ln_2.bias"),
            ("fc_w", "mlp.c_fc.weight"), ("fc_b", "mlp.c_fc.bias"),
            ("fc_proj_w", "mlp.c_proj.weight"), ("fc_proj_b", "mlp.c_proj.bias")]})
    return cfg, w, blob


def layernorm(x, g, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


_erf = np.vectorize(math.erf)


def gelu(x, act):
    if act in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if act == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    raise ValueError("activation_function %r" % act)


def forward(cfg, w, ids, hidden=None, attn=None):
    """The logits of every position (T, V); hidden, when a list, receives the residual stream
    (T, C) after the embeddings and after each block (the logit lens reads them); attn, when a
    list, receives each layer's causal softmax (NH, T, T)."""
    T = len(ids)
    C, NH = cfg["n_embd"], cfg["n_head"]
    HS = C // NH
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = cfg.get("activation_function", "gelu_new")
    x = w["wte"][ids] + w["wpe"][:T]
    mask = np.tril(np.ones((T, T), dtype=bool))
    if hidden is not None:
        hidden.append(x)
    for ly in w["h"]:
        h = layernorm(x, ly["ln_1_w"], ly["ln_1_b"], eps)
        qkv = h @ ly["attn_w"] + ly["attn_b"]
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
        q = q.reshape(T, NH, HS).transpose(1, 0, 2)
        k = k.reshape(T, NH, HS).transpose(1, 0, 2)
        v = v.reshape(T, NH, HS).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(HS)
        s = np.where(mask, s, -np.inf)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        if attn is not None:
            attn.append(p)
        y = (p @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ ly["proj_w"] + ly["proj_b"]
        h = layernorm(x, ly["ln_2_w"], ly["ln_2_b"], eps)
        x = x + gelu(h @ ly["fc_w"] + ly["fc_b"], act) @ ly["fc_proj_w"] + ly["fc_proj_b"]
        if hidden is not None:
            hidden.append(x)
    return final_logits(cfg, w, x)


def final_logits(cfg, w, x):
    """The final LayerNorm and the head over residual rows x (..., C): the model's logits for
    its last residual stream, the logit lens for an earlier one."""
    x = layernorm(x, w["ln_f_w"], w["ln_f_b"], cfg.get("layer_norm_epsilon", 1e-5))
    return x @ w["lm_head"].T


def softmax_rows(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def lens_lines(hidden, logits_of, probs_format="%.7g"):
    """The lens lines of a golden: for the last position, layer l's softmax(logits_of(h_l)),
    l = 0 (the embeddings) .. L; the last equals the model's own distribution."""
    lines = ["L %d" % (len(hidden) - 1)]
    for l, h in enumerate(hidden):
        p = softmax_rows(logits_of(h[-1]))
        lines.append("lens %d argmax %d probs %s" % (
            l, int(np.argmax(p)), " ".join(probs_format % v for v in p)))
    return lines


# --------------------------------------------------------------------------------------------
# main


def write_text(text, path):
    """Writes text to path, or to standard output when path is empty."""
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--rows", default="0,-1", help="rows (positions) to write; negative from the end")
    ap.add_argument("--name", help="model name written in the file (default: the directory's)")
    ap.add_argument("--out", help="output file (default stdout)")
    ap.add_argument("--fnv", action="store_true", help="print model.safetensors' FNV-1a 64 and exit")
    ap.add_argument("--lens", action="store_true",
                    help="write the logit lens of the last position (one line per layer) instead "
                         "of logits rows")
    ap.add_argument("--attention", action="store_true",
                    help="write each requested row's attention probabilities instead of logits")
    a = ap.parse_args()

    if a.fnv:
        with open(os.path.join(a.model, "model.safetensors"), "rb") as f:
            print("%016x" % fnv1a64(f.read()))
        return 0
    if not a.ids:
        ap.error("--ids is required")
    ids = [int(t) for t in a.ids.split(",")]
    cfg, w, blob = load_model(a.model, a.dtype)
    hidden = []
    attn = [] if a.attention else None
    logits = forward(cfg, w, np.array(ids), hidden, attn)
    T, V = logits.shape
    rows = sorted({r % T for r in (int(r) for r in a.rows.split(","))})

    lines = ["tokentop-lens 1" if a.lens else "tokentop-golden 1",
             "model %s" % (a.name or os.path.basename(os.path.normpath(a.model))),
             "safetensors_fnv1a64 %016x" % fnv1a64(blob),
             "dtype %s" % a.dtype,
             "V %d" % V,
             "ids %d %s" % (len(ids), " ".join(str(i) for i in ids))]
    if a.lens:
        lines += lens_lines(hidden, lambda h: final_logits(cfg, w, h))
        rows = []
    if attn is not None:
        NH = cfg["n_head"]
        lines.append("L %d NH %d NKV %d" % (len(attn), NH, NH))
        for r in rows:
            for l, p in enumerate(attn):
                for h in range(NH):
                    lines.append("attn %d %d %d %d %s" % (
                        r, l, h, h, " ".join("%.9g" % v for v in p[h, r, :r + 1])))
    else:
        for r in rows:
            lines.append("row %d argmax %d logits %s" % (
                r, int(np.argmax(logits[r])), " ".join("%.7g" % v for v in logits[r])))
    write_text("\n".join(lines) + "\n", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
