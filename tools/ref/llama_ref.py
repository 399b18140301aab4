#!/usr/bin/python3
"""llama_ref.py: an independent float64 reference of the Llama family (numpy only) that writes goldens.

It is an independent float64 numpy implementation of the semantics of Hugging Face transformers'
modeling_llama, modeling_mistral, modeling_qwen2 and modeling_qwen3 (PyTorch is not needed). It
shares no code with tokentop: it reads config.json with the json module, parses safetensors
headers itself (model.safetensors, or model.safetensors.index.json and its shards; F32/F16/BF16),
binds the tensors by their Hugging Face names and runs the whole sequence without a cache:

    x = embed_tokens[ids]
    per layer: h = RMSNorm(x)                          weight * x / sqrt(mean(x^2) + eps)
               q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
               qwen3: q, k = RMSNorm_head(q), RMSNorm_head(k)   (over head_dim, before RoPE)
               q, k = RoPE(q), RoPE(k)                 rotate_half: pairs (i, i + head_dim/2)
               y = causal softmax(q k^T / sqrt(head_dim)) v,  query head h reads KV head
                   h // (heads / kv_heads) (grouped-query attention, as HF's repeat_kv)
               x += y Wo^T (+bo)
               h = RMSNorm(x);  x += down(silu(gate(h)) * up(h))
    logits = RMSNorm_f(x) lm_head^T        (lm_head = embed_tokens when tied or absent)

RoPE: inv_freq_i = 1 / theta^(2i / head_dim); rope_scaling of type "llama3" rescales inv_freq
as transformers' _compute_llama3_parameters does (factor, low_freq_factor, high_freq_factor,
original_max_position_embeddings); "default" or null means none; any other type is refused by
name. Which projections carry biases follows each modeling file: qwen2 q/k/v always; llama q/k/v/o
when attention_bias, gate/up/down when mlp_bias; qwen3 q/k/v/o when attention_bias; mistral none.

--dtype rounds every parameter (matrices, biases, norms, embeddings) to that precision first,
round-to-nearest-even as PyTorch's .half()/.bfloat16() do, which is how tokentop holds a model
loaded with --dtype; the arithmetic stays float64.

Usage:
  llama_ref.py MODEL_DIR --ids 1,2,3 [--dtype fp32|fp16|bf16] [--rows 0,9,-1] [--greedy 16]
               [--top 5] [--name NAME] [--fixture PATH] [--out FILE]
  llama_ref.py MODEL_DIR --ids 1,2,3 --attention [--rows ...] [--dtype ...] [--out FILE]
                                    (attention golden: gpt2_ref.py's --attention format)
  llama_ref.py MODEL_DIR --fnv      (FNV-1a 64 of model.safetensors, or of the first shard)
  llama_ref.py --selftest           (checks the reference against independent formulations)
  llama_ref.py MODEL_DIR --ids ... --lens   (a lens golden instead: gpt2_ref.py's --lens format)

The output (tests/golden/*.txt) is gpt2_ref.py's golden format plus greedy and top lines:
  tokentop-golden 1
  model <name>
  fixture <model directory, as given by --fixture>           (only with --fixture)
  safetensors_fnv1a64 <16 hex digits>
  dtype <held dtype>
  V <V>
  ids <n> <id> ...
  row <i> argmax <a> logits <V numbers>      (one line per requested row)
  greedy <n> <id> ...                        (the greedy continuation after the ids; each step
                                              recomputes the whole sequence)
  top <row> <k> <id>:<prob> ...              (softmax's k most probable ids of each row)
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_ref  # noqa: E402  (what the two references share)
from gpt2_ref import fnv1a64, lens_lines, round_bf16, round_to, write_text  # noqa: E402


class RefError(Exception):
    """A message naming the file, the field and the value."""


# --------------------------------------------------------------------------------------------
# safetensors

def read_safetensors(path):
    """Returns ({name: float64 array}, the file's bytes); a dtype it cannot read is an error."""
    return gpt2_ref.read_safetensors(path, RefError)


def weight_files(d):
    """The safetensors files of a model directory, the first one first."""
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(os.path.join(d, "model.safetensors")) and os.path.exists(index):
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        return [os.path.join(d, s) for s in sorted(set(wm.values()))]
    return [os.path.join(d, "model.safetensors")]


def read_weights(d):
    """Returns ({name: array} over every file, the first file's bytes)."""
    tensors, first = {}, None
    for path in weight_files(d):
        t, blob = read_safetensors(path)
        tensors.update(t)
        first = blob if first is None else first
    return tensors, first


# --------------------------------------------------------------------------------------------
# rounding to the held dtype

# --------------------------------------------------------------------------------------------
# configuration

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")

# transformers' defaults for fields a config.json may leave out (each *Config.__init__)
DEFAULT_KV_HEADS = {"llama": None, "mistral": 8, "qwen2": 32, "qwen3": 32}   # None: = heads
DEFAULT_THETA = 10000.0


def read_config(d):
    path = os.path.join(d, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    mt = cfg.get("model_type")
    if mt not in FAMILIES:
        raise RefError("%s: model_type %r is not one of %s" % (path, mt, ", ".join(FAMILIES)))
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise RefError("%s: hidden_act %r: only silu (SwiGLU) is implemented" % (path, act))
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", DEFAULT_KV_HEADS[mt])
    kv = H if kv is None else kv
    if H % kv:
        raise RefError("%s: num_key_value_heads %d does not divide num_attention_heads %d"
                       % (path, kv, H))
    hd = cfg.get("head_dim")
    if hd is None:
        hd = 128 if mt == "qwen3" else C // H    # Qwen3Config's default head_dim is 128
    bias = cfg.get("attention_bias", False)
    m = {
        "type": mt, "C": C, "L": cfg["num_hidden_layers"], "H": H, "KV": kv, "D": hd,
        "F": cfg["intermediate_size"], "V": cfg["vocab_size"],
        "eps": cfg.get("rms_norm_eps", 1e-6),
        "qkv_bias": mt == "qwen2" or (mt in ("llama", "qwen3") and bias),
        "o_bias": mt in ("llama", "qwen3") and bias,
        "mlp_bias": mt == "llama" and cfg.get("mlp_bias", False),
        "qk_norm": mt == "qwen3",
        "tied": cfg.get("tie_word_embeddings", False),
        "inv_freq": rope_inv_freq(cfg, hd, path),
        "window": None,
    }
    if hd % 2:
        raise RefError("%s: head_dim %d is odd; RoPE needs pairs" % (path, hd))
    if mt == "mistral" or (mt in ("qwen2", "qwen3") and cfg.get("use_sliding_window", False)):
        m["window"] = cfg.get("sliding_window", 4096)     # the configs' default when absent
    return cfg, m


def rope_inv_freq(cfg, D, path):
    theta = float(cfg.get("rope_theta", DEFAULT_THETA))
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    rs = cfg.get("rope_scaling")
    if rs is None:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "default":
        return inv
    if kind != "llama3":
        raise RefError("%s: rope_scaling type %r is not supported (only llama3)" % (path, kind))
    return llama3_inv_freq(inv, rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                           rs["original_max_position_embeddings"])


def llama3_inv_freq(inv, factor, low, high, old_ctx):
    """transformers' _compute_llama3_parameters, step by step."""
    low_wavelen = old_ctx / low
    high_wavelen = old_ctx / high
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, out)


# --------------------------------------------------------------------------------------------
# weights

def bind(m, tensors, dtype, where):
    """Binds the Hugging Face tensor names, checks every shape, rounds to dtype."""
    C, H, KV, D, F, V = m["C"], m["H"], m["KV"], m["D"], m["F"], m["V"]

    def get(name, shape):
        if name not in tensors:
            raise RefError("%s: tensor %s is missing" % (where, name))
        t = tensors[name]
        if list(t.shape) != list(shape):
            raise RefError("%s: tensor %s: expected %s, got %s"
                           % (where, name, list(shape), list(t.shape)))
        return round_to(t, dtype)

    w = {"embed": get("model.embed_tokens.weight", (V, C)),
         "norm": get("model.norm.weight", (C,)), "layers": []}
    if m["tied"] or "lm_head.weight" not in tensors:
        w["lm_head"] = w["embed"]
    else:
        w["lm_head"] = get("lm_head.weight", (V, C))
    for i in range(m["L"]):
        p = "model.layers.%d." % i
        ly = {
            "in_norm": get(p + "input_layernorm.weight", (C,)),
            "post_norm": get(p + "post_attention_layernorm.weight", (C,)),
            "wq": get(p + "self_attn.q_proj.weight", (H * D, C)),
            "wk": get(p + "self_attn.k_proj.weight", (KV * D, C)),
            "wv": get(p + "self_attn.v_proj.weight", (KV * D, C)),
            "wo": get(p + "self_attn.o_proj.weight", (C, H * D)),
            "wg": get(p + "mlp.gate_proj.weight", (F, C)),
            "wu": get(p + "mlp.up_proj.weight", (F, C)),
            "wd": get(p + "mlp.down_proj.weight", (C, F)),
        }
        zero = np.zeros
        ly["bq"], ly["bk"], ly["bv"] = zero(H * D), zero(KV * D), zero(KV * D)
        ly["bo"], ly["bg"], ly["bu"], ly["bd"] = zero(C), zero(F), zero(F), zero(C)
        if m["qkv_bias"]:
            ly["bq"] = get(p + "self_attn.q_proj.bias", (H * D,))
            ly["bk"] = get(p + "self_attn.k_proj.bias", (KV * D,))
            ly["bv"] = get(p + "self_attn.v_proj.bias", (KV * D,))
        if m["o_bias"]:
            ly["bo"] = get(p + "self_attn.o_proj.bias", (C,))
        if m["mlp_bias"]:
            ly["bg"] = get(p + "mlp.gate_proj.bias", (F,))
            ly["bu"] = get(p + "mlp.up_proj.bias", (F,))
            ly["bd"] = get(p + "mlp.down_proj.bias", (C,))
        if m["qk_norm"]:
            ly["q_norm"] = get(p + "self_attn.q_norm.weight", (D,))
            ly["k_norm"] = get(p + "self_attn.k_norm.weight", (D,))
        w["layers"].append(ly)
    return w


def load_model(d, dtype):
    cfg, m = read_config(d)
    tensors, first = read_weights(d)
    w = bind(m, tensors, dtype, d)
    return cfg, m, w, first


# --------------------------------------------------------------------------------------------
# forward

def rmsnorm(x, weight, eps):
    return weight * (x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope(x, inv_freq, pos):
    """x: (T, heads, D). HF's apply_rotary_pos_emb: x*cos + rotate_half(x)*sin with
    cos/sin = cat(freqs, freqs), rotate_half(x) = cat(-x2, x1)."""
    freqs = np.outer(pos, inv_freq)                          # (T, D/2)
    emb = np.concatenate([freqs, freqs], axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * np.cos(emb) + rot * np.sin(emb)


def forward(m, w, ids, hidden=None, attn=None):
    """The logits of every position (T, V); hidden, when a list, receives the residual stream
    (T, C) after the embeddings and after each block (the logit lens reads them); attn, when a
    list, receives each layer's causal softmax (H, T, T)."""
    ids = np.asarray(ids)
    T = len(ids)
    H, KV, D = m["H"], m["KV"], m["D"]
    if m["window"] is not None and m["window"] < T:
        raise RefError("sliding_window %d is shorter than the sequence (%d): not implemented"
                       % (m["window"], T))
    eps = m["eps"]
    pos = np.arange(T, dtype=np.float64)
    x = w["embed"][ids]
    mask = np.tril(np.ones((T, T), dtype=bool))
    if hidden is not None:
        hidden.append(x)
    for ly in w["layers"]:
        h = rmsnorm(x, ly["in_norm"], eps)
        q = (h @ ly["wq"].T + ly["bq"]).reshape(T, H, D)
        k = (h @ ly["wk"].T + ly["bk"]).reshape(T, KV, D)
        v = (h @ ly["wv"].T + ly["bv"]).reshape(T, KV, D)
        if m["qk_norm"]:
            q = rmsnorm(q, ly["q_norm"], eps)
            k = rmsnorm(k, ly["k_norm"], eps)
        q = rope(q, m["inv_freq"], pos)
        k = rope(k, m["inv_freq"], pos)
        k = np.repeat(k, H // KV, axis=1)                    # head h reads KV head h // rep
        v = np.repeat(v, H // KV, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / math.sqrt(D)
        s = np.where(mask, s, -np.inf)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        if attn is not None:
            attn.append(p)
        y = np.einsum("hts,shd->thd", p, v).reshape(T, H * D)
        x = x + y @ ly["wo"].T + ly["bo"]
        h = rmsnorm(x, ly["post_norm"], eps)
        g = h @ ly["wg"].T + ly["bg"]
        u = h @ ly["wu"].T + ly["bu"]
        x = x + (silu(g) * u) @ ly["wd"].T + ly["bd"]
        if hidden is not None:
            hidden.append(x)
    return final_logits(m, w, x)


def final_logits(m, w, x):
    """The final RMSNorm and the head over residual rows x (..., C): the model's logits for its
    last residual stream, the logit lens for an earlier one."""
    return rmsnorm(x, w["norm"], m["eps"]) @ w["lm_head"].T


def softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def greedy(m, w, ids, n):
    """The greedy continuation: n argmax ids, each step recomputing the whole sequence.
    Also returns the smallest gap between the best and second-best logit over the steps."""
    seq, out, gap = list(ids), [], math.inf
    for _ in range(n):
        row = forward(m, w, seq)[-1]
        order = np.argsort(-row, kind="stable")
        gap = min(gap, row[order[0]] - row[order[1]])
        out.append(int(order[0]))
        seq.append(int(order[0]))
    return out, gap


# --------------------------------------------------------------------------------------------
# self-checks: the reference against independent formulations of the same model

def naive_forward(m, w, ids):
    """Per-position, per-head loops; RoPE as complex rotation of (x_i + j x_{i+D/2}); a key/value
    head chosen by index arithmetic; no masks. Slow, for tiny models only."""
    H, KV, D, eps = m["H"], m["KV"], m["D"], m["eps"]
    half, rep = D // 2, H // KV
    xs = [w["embed"][t].copy() for t in ids]
    for ly in w["layers"]:
        ks, vs, ys = [], [], []
        for t, x in enumerate(xs):
            h = rmsnorm(x, ly["in_norm"], eps)
            q = ly["wq"] @ h + ly["bq"]
            k = ly["wk"] @ h + ly["bk"]
            v = ly["wv"] @ h + ly["bv"]
            qh = [q[i * D:(i + 1) * D] for i in range(H)]
            kh = [k[i * D:(i + 1) * D] for i in range(KV)]
            if m["qk_norm"]:
                qh = [rmsnorm(a, ly["q_norm"], eps) for a in qh]
                kh = [rmsnorm(a, ly["k_norm"], eps) for a in kh]
            turn = np.exp(1j * t * m["inv_freq"])

            def rot(a):
                z = (a[:half] + 1j * a[half:]) * turn
                return np.concatenate([z.real, z.imag])
            ks.append([rot(a) for a in kh])
            vs.append([v[i * D:(i + 1) * D] for i in range(KV)])
            y = []
            for hh in range(H):
                qr = rot(qh[hh])
                kv = hh // rep
                sc = np.array([qr @ ks[s][kv] for s in range(t + 1)]) / math.sqrt(D)
                p = softmax(sc)
                y.append(sum(p[s] * vs[s][kv] for s in range(t + 1)))
            ys.append(np.concatenate(y))
        for t in range(len(xs)):
            xs[t] = xs[t] + ly["wo"] @ ys[t] + ly["bo"]
            h = rmsnorm(xs[t], ly["post_norm"], eps)
            g = ly["wg"] @ h + ly["bg"]
            u = ly["wu"] @ h + ly["bu"]
            xs[t] = xs[t] + ly["wd"] @ (g / (1 + np.exp(-g)) * u) + ly["bd"]
    return np.array([w["lm_head"] @ rmsnorm(x, w["norm"], eps) for x in xs])


def tiny_model(rng, mt="llama", H=4, KV=2, D=8, C=16, F=24, V=40, L=2, qkv_bias=True,
               o_bias=True, qk_norm=False, tied=False, inv_freq=None):
    n = lambda *s: rng.normal(0, 0.5, s)
    one = lambda s: 1 + rng.uniform(-0.2, 0.2, s)
    m = {"type": mt, "C": C, "L": L, "H": H, "KV": KV, "D": D, "F": F, "V": V, "eps": 1e-6,
         "qkv_bias": qkv_bias, "o_bias": o_bias, "mlp_bias": True, "qk_norm": qk_norm,
         "tied": tied, "window": None,
         "inv_freq": inv_freq if inv_freq is not None else 1 / 100.0 ** (np.arange(0, D, 2) / D)}
    w = {"embed": n(V, C), "norm": one(C), "layers": []}
    w["lm_head"] = w["embed"] if tied else n(V, C)
    for _ in range(L):
        ly = {"in_norm": one(C), "post_norm": one(C), "wq": n(H * D, C), "wk": n(KV * D, C),
              "wv": n(KV * D, C), "wo": n(C, H * D), "wg": n(F, C), "wu": n(F, C),
              "wd": n(C, F), "bq": n(H * D), "bk": n(KV * D), "bv": n(KV * D), "bo": n(C),
              "bg": n(F), "bu": n(F), "bd": n(C), "q_norm": one(D), "k_norm": one(D)}
        w["layers"].append(ly)
    return m, w


def llamacpp_permute(wt, n_head):
    """llama.cpp's convert_hf_to_gguf permute(): HF's half-split rows of a q/k projection to the
    interleaved pairs (2i, 2i+1) of Meta's original checkpoints."""
    return (wt.reshape(n_head, 2, wt.shape[0] // n_head // 2, *wt.shape[1:])
            .swapaxes(1, 2).reshape(wt.shape))


def rope_interleaved(x, inv_freq, pos):
    """Meta's / llama.cpp's RoPE: pairs (2i, 2i+1) rotated by pos * inv_freq_i. x: (T, heads, D)."""
    ang = np.outer(pos, inv_freq)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * np.cos(ang) - b * np.sin(ang)
    out[..., 1::2] = a * np.sin(ang) + b * np.cos(ang)
    return out


def selftest():
    rng = np.random.default_rng(1234)
    failures, results = [], []

    def check(name, ok, detail=""):
        results.append(name)
        print("%-58s %s%s" % (name, "ok" if ok else "FAILED", (" (" + detail + ")") if detail else ""))
        if not ok:
            failures.append(name)

    # 1. rotate_half on HF rows == interleaved pairs on llama.cpp-permuted rows
    T, NH, D, C = 7, 3, 8, 12
    inv = 1 / 10000.0 ** (np.arange(0, D, 2) / D)
    pos = np.arange(T, dtype=np.float64)
    wq, wk = rng.normal(size=(NH * D, C)), rng.normal(size=(NH * D, C))
    h = rng.normal(size=(T, C))
    q_hf = rope((h @ wq.T).reshape(T, NH, D), inv, pos)
    k_hf = rope((h @ wk.T).reshape(T, NH, D), inv, pos)
    q_cpp = rope_interleaved((h @ llamacpp_permute(wq, NH).T).reshape(T, NH, D), inv, pos)
    k_cpp = rope_interleaved((h @ llamacpp_permute(wk, NH).T).reshape(T, NH, D), inv, pos)
    s_hf = np.einsum("thd,shd->hts", q_hf, k_hf)
    s_cpp = np.einsum("thd,shd->hts", q_cpp, k_cpp)
    err = np.abs(s_hf - s_cpp).max()
    check("rope: rotate_half == interleaved after llama.cpp permute", err < 1e-12, "%.1e" % err)
    perm = llamacpp_permute(np.arange(NH * D), NH).reshape(NH, D)[0] % D
    err = np.abs(q_hf[..., perm] - q_cpp).max()
    check("rope: rotated q agrees element by element", err < 1e-12, "%.1e" % err)

    # 2. the vectorized forward == the naive loops, with every feature switched on
    i3 = llama3_inv_freq(1 / 500000.0 ** (np.arange(0, 16, 2) / 16), 8.0, 1.0, 4.0, 64)
    for label, kw in [("llama GQA, biases, untied", {}),
                      ("qwen3 q/k norm, head_dim != C/H, tied", {"qk_norm": True, "D": 12,
                                                                "tied": True}),
                      ("llama3 rope scaling", {"D": 16, "inv_freq": i3}),
                      ("MHA", {"KV": 4, "qkv_bias": False, "o_bias": False})]:
        m, w = tiny_model(rng, **kw)
        ids = rng.integers(0, m["V"], 9)
        err = np.abs(forward(m, w, ids) - naive_forward(m, w, ids)).max()
        check("forward == naive loops: " + label, err < 1e-10, "%.1e" % err)

    # 3. GQA == MHA with each KV head's rows repeated for its query heads (HF's repeat_kv)
    m, w = tiny_model(rng, H=6, KV=2)
    m2 = dict(m, KV=6)
    w2 = dict(w, layers=[])
    D = m["D"]
    for ly in w["layers"]:
        rows = lambda a: np.repeat(a.reshape(2, D, *a.shape[1:]), 3, axis=0).reshape(6 * D,
                                                                                     *a.shape[1:])
        w2["layers"].append(dict(ly, wk=rows(ly["wk"]), wv=rows(ly["wv"]), bk=rows(ly["bk"]),
                                 bv=rows(ly["bv"])))
    ids = rng.integers(0, m["V"], 11)
    err = np.abs(forward(m, w, ids) - forward(m2, w2, ids)).max()
    check("GQA (6 heads, 2 KV) == MHA with repeated K/V rows", err < 1e-12, "%.1e" % err)

    # 4. llama3 scaling: the three bands, and continuity where they meet
    inv = 1 / 500000.0 ** (np.arange(0, 128, 2) / 128)
    s = llama3_inv_freq(inv, 8.0, 1.0, 4.0, 8192)
    wl = 2 * math.pi / inv
    hi, lo = wl < 8192 / 4, wl > 8192
    check("llama3: short wavelengths unchanged", np.allclose(s[hi], inv[hi], rtol=0, atol=0))
    check("llama3: long wavelengths divided by factor", np.allclose(s[lo], inv[lo] / 8, rtol=1e-15))
    mid = ~hi & ~lo
    check("llama3: Llama 3.1's shape has a medium band", 0 < mid.sum() < len(inv),
          "%d high, %d medium, %d low" % (hi.sum(), mid.sum(), lo.sum()))
    edge = np.array([2 * math.pi / (8192 / 4), 2 * math.pi / 8192])    # the band edges
    e = llama3_inv_freq(edge, 8.0, 1.0, 4.0, 8192)
    check("llama3: continuous at both band edges", np.allclose(e, edge / np.array([1, 8])))
    check("llama3: monotone (a longer wavelength never gets a higher frequency)",
          bool(np.all(np.diff(s) < 0)))

    # llama.cpp's converter writes the same scaling as per-frequency divisors (rope_freqs)
    def llamacpp_rope_factors(freqs, factor, low, high, old_ctx):
        out = []
        for freq in freqs:
            wavelen = 2 * math.pi / freq
            if wavelen < old_ctx / high:
                out.append(1)
            elif wavelen > old_ctx / low:
                out.append(factor)
            else:
                smooth = (old_ctx / wavelen - low) / (high - low)
                out.append(1 / ((1 - smooth) / factor + smooth))
        return np.array(out, dtype=np.float64)
    for label, theta, dim, orig in (("Llama 3.1 shapes", 500000.0, 128, 8192),
                                    ("llama-untied-rope3's", 500000.0, 16, 64)):
        inv = 1 / theta ** (np.arange(0, dim, 2) / dim)
        ours = llama3_inv_freq(inv, 8.0, 1.0, 4.0, orig)
        theirs = inv / llamacpp_rope_factors(inv, 8.0, 1.0, 4.0, orig)
        err = np.abs(ours / theirs - 1).max()
        check("llama3 == llama.cpp's rope_freqs divisors, " + label, err < 1e-14, "%.1e" % err)
    f16 = llamacpp_rope_factors(1 / 500000.0 ** (np.arange(0, 16, 2) / 16), 8.0, 1.0, 4.0, 64)
    check("llama3: llama-untied-rope3's head_dim 16 meets all three bands",
          f16[0] == 1 and 1 < f16[1] < 8 and np.all(f16[2:] == 8), str(np.round(f16, 3)))

    # 5. rounding: round-to-nearest-even at the ties
    one = 1.0
    b = round_to(np.array([one + 2 ** -8, one + 3 * 2 ** -8, 1 + 2 ** -9, -2.5e38]), "bf16")
    check("bf16 rounding: ties to even, sign kept",
          list(b[:3]) == [1.0, 1 + 2 ** -6, 1.0] and b[3] < 0, str(list(b)))
    with np.errstate(over="ignore"):
        f = round_to(np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 70000.0]), "fp16")
    check("fp16 rounding: ties to even, overflow to inf",
          list(f[:2]) == [1.0, 1 + 2 ** -9] and np.isinf(f[2]), str(list(f)))

    # 6. config refusals name the field and the value
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        base = {"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2,
                "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 10}
        for edit, want in [({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
                            "rope_scaling type 'yarn'"),
                           ({"model_type": "gpt_neox"}, "model_type 'gpt_neox'"),
                           ({"hidden_act": "gelu"}, "hidden_act 'gelu'")]:
            with open(os.path.join(d, "config.json"), "w") as fp:
                json.dump(dict(base, **edit), fp)
            try:
                read_config(d)
                msg = "accepted"
            except RefError as ex:
                msg = str(ex)
            check("refuses %s" % want, want in msg and "config.json" in msg, msg)

    # 7. files: a sharded checkpoint reads as the same model as one file; the index is complete
    import subprocess
    mk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mkllama.py")
    with tempfile.TemporaryDirectory() as d:
        one, two = os.path.join(d, "one"), os.path.join(d, "two")
        for out, shards in ((one, 1), (two, 3)):
            subprocess.run([sys.executable, mk, out, "--type", "qwen3", "--hidden", "32",
                            "--head-dim", "16", "--untied", "--file-dtype", "bf16", "--seed", "5",
                            "--shards", str(shards)], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(two, "model.safetensors.index.json")) as fp:
            index = json.load(fp)
        t1, _ = read_weights(one)
        t2, _ = read_weights(two)
        sizes = sum(a.size * 2 for a in t2.values())
        check("sharded: weight_map names every tensor, total_size their bytes",
              sorted(index["weight_map"]) == sorted(t1) and index["metadata"]["total_size"] == sizes,
              "%d files" % len(set(index["weight_map"].values())))
        ids = list(range(0, 200, 17))
        l1 = forward(*load_model(one, "fp32")[1:3], ids)
        l2 = forward(*load_model(two, "fp32")[1:3], ids)
        check("sharded: same logits as one file", np.array_equal(l1, l2))
        with open(os.path.join(one, "config.json")) as fp:
            c = json.load(fp)
        with open(os.path.join(one, "config.json"), "w") as fp:
            json.dump(dict(c, tie_word_embeddings=True), fp)
        cfg, m, w, _ = load_model(one, "fp32")
        check("tie_word_embeddings true: lm_head.weight present but embed_tokens used",
              w["lm_head"] is w["embed"])

    print("%d passed, %d failed" % (len(results) - len(failures), len(failures)))
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------
# main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--rows", default="0,-1", help="rows (positions) to write; negative from the end")
    ap.add_argument("--greedy", type=int, default=16, help="greedy tokens to write (default 16)")
    ap.add_argument("--top", type=int, default=5, help="top probabilities per row (default 5)")
    ap.add_argument("--name", help="model name written in the file (default: the directory's)")
    ap.add_argument("--fixture", help="the model directory to record in the file")
    ap.add_argument("--out", help="output file (default stdout)")
    ap.add_argument("--fnv", action="store_true", help="print the first weight file's FNV-1a 64")
    ap.add_argument("--attention", action="store_true",
                    help="write each requested row's attention probabilities per layer and head "
                         "(gpt2_ref.py's --attention format) instead of logits")
    ap.add_argument("--selftest", action="store_true", help="run the self-checks and exit")
    ap.add_argument("--lens", action="store_true",
                    help="write the logit lens of the last position (one line per layer) instead "
                         "of logits rows, greedy and top lines")
    a = ap.parse_args()

    if a.selftest:
        return selftest()
    if not a.model:
        ap.error("MODEL_DIR is required")
    try:
        if a.fnv:
            with open(weight_files(a.model)[0], "rb") as f:
                print("%016x" % fnv1a64(f.read()))
            return 0
        if not a.ids:
            ap.error("--ids is required")
        ids = [int(t) for t in a.ids.split(",")]
        cfg, m, w, first = load_model(a.model, a.dtype)
        for i in ids:
            if not 0 <= i < m["V"]:
                raise RefError("--ids: id %d is outside the vocabulary (vocab_size %d)" % (i, m["V"]))
        hidden = []
        attn = [] if a.attention else None
        logits = forward(m, w, ids, hidden, attn)
        if a.lens or attn is not None:
            a.greedy = 0
        cont, gap = greedy(m, w, ids, a.greedy) if a.greedy > 0 else ([], math.inf)
    except RefError as ex:
        print("llama_ref.py: %s" % ex, file=sys.stderr)
        return 1
    T, V = logits.shape
    rows = sorted({r % T for r in (int(r) for r in a.rows.split(","))})

    lines = ["tokentop-lens 1" if a.lens else "tokentop-golden 1",
             "model %s" % (a.name or os.path.basename(os.path.normpath(a.model)))]
    if a.fixture:
        lines.append("fixture %s" % a.fixture)
    lines += ["safetensors_fnv1a64 %016x" % fnv1a64(first),
              "dtype %s" % a.dtype,
              "V %d" % V,
              "ids %d %s" % (len(ids), " ".join(str(i) for i in ids))]
    if a.lens:
        lines += lens_lines(hidden, lambda h: final_logits(m, w, h))
    if attn is not None:
        H, KV = m["H"], m["KV"]
        lines.append("L %d NH %d NKV %d" % (len(attn), H, KV))
        for r in rows:
            for l, p in enumerate(attn):
                for h in range(H):
                    lines.append("attn %d %d %d %d %s" % (
                        r, l, h, h // (H // KV), " ".join("%.9g" % v for v in p[h, r, :r + 1])))
    if a.lens or attn is not None:
        write_text("\n".join(lines) + "\n", a.out)
        return 0
    for r in rows:
        lines.append("row %d argmax %d logits %s" % (
            r, int(np.argmax(logits[r])), " ".join("%.7g" % v for v in logits[r])))
    if a.greedy > 0:
        lines.append("greedy %d %s" % (len(cont), " ".join(str(i) for i in cont)))
    for r in rows:
        p = softmax(logits[r])
        top = np.argsort(-p, kind="stable")[:a.top]
        lines.append("top %d %d %s" % (r, len(top), " ".join("%d:%.7g" % (i, p[i]) for i in top)))
    write_text("\n".join(lines) + "\n", a.out)
    # for whoever regenerates: how close the reference's own greedy choices were
    if a.greedy > 0:
        print("%s: greedy %s; smallest top-1/top-2 logit gap %.4f; top-1 p of rows %s" % (
            a.name or a.model, " ".join(map(str, cont)), gap,
            " ".join("%.3f" % softmax(logits[r]).max() for r in rows)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
