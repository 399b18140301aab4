"""GPT-2 in PyTorch for the training scripts, and the Hugging Face directory format (read and write).

The model is the standard GPT-2: learned positions, pre-LayerNorm blocks (eps 1e-5), causal
multi-head attention, MLP 4*C with GELU (tanh form, HF "gelu_new"), final LayerNorm, LM head tied
to the token embedding. Weights are written as HF GPT-2 names with Conv1D layouts ([in, out]), so
the directory loads in tokentop and in transformers alike. safetensors is written by hand (the
package is not in Debian): 8-byte little-endian header length, JSON header padded with spaces to a
multiple of 8, then the tensors' little-endian bytes in header order.
"""
import json
import math
import os
import struct

# OpenBLAS in Debian picks its kernels from CPUID; under some hypervisors it falls back to the
# generic "Prescott" core and a 1024x1024 matmul takes ~50 ms instead of ~9. Choose the core from
# the CPU flags before torch loads the library (an explicit OPENBLAS_CORETYPE still wins).
def _openblas_coretype():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return None
    if "avx512f" in flags and "avx512bw" in flags and "avx512vl" in flags:
        return "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Haswell"
    return None


if "OPENBLAS_CORETYPE" not in os.environ and _openblas_coretype():
    os.environ["OPENBLAS_CORETYPE"] = _openblas_coretype()

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT2Config:
    def __init__(self, vocab_size, n_positions, n_embd, n_layer, n_head, dropout=0.0, eot_id=None):
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.dropout = dropout
        self.eot_id = vocab_size - 1 if eot_id is None else eot_id

    def hf_dict(self):
        """config.json as transformers writes it for GPT2LMHeadModel."""
        return {
            "activation_function": "gelu_new",
            "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.0,  # train.py never drops attention weights (a Bernoulli draw per score)
            "bos_token_id": self.eot_id,
            "embd_pdrop": self.dropout,
            "eos_token_id": self.eot_id,
            "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05,
            "model_type": "gpt2",
            "n_ctx": self.n_positions,
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "n_inner": None,
            "n_layer": self.n_layer,
            "n_positions": self.n_positions,
            "reorder_and_upcast_attn": False,
            "resid_pdrop": self.dropout,
            "scale_attn_by_inverse_layer_idx": False,
            "scale_attn_weights": True,
            "summary_activation": None,
            "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True,
            "summary_type": "cls_index",
            "summary_use_proj": True,
            "torch_dtype": "float16",
            "use_cache": True,
            "vocab_size": self.vocab_size,
        }

    @staticmethod
    def from_hf(d):
        if d.get("model_type") != "gpt2":
            raise ValueError("config.json: model_type %r, expected 'gpt2'" % d.get("model_type"))
        return GPT2Config(d["vocab_size"], d["n_positions"], d["n_embd"], d["n_layer"], d["n_head"],
                          eot_id=d.get("eos_token_id"))


# ---------------------------------------------------------------------------------------------
# Model

class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        T = cfg.n_positions
        # Additive causal mask (0 on and below the diagonal, -inf above), added by baddbmm in the
        # same pass as the scaled scores: at T=1024 the score matrices dominate a step on CPU, and
        # a separate masked_fill and scale are two more passes over them.
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        NH = self.n_head
        HS = C // NH
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        # (B*NH, T, HS): batched 3-D matmuls
        q = q.reshape(B, T, NH, HS).transpose(1, 2).reshape(B * NH, T, HS)
        k = k.reshape(B, T, NH, HS).transpose(1, 2).reshape(B * NH, T, HS)
        v = v.reshape(B, T, NH, HS).transpose(1, 2).reshape(B * NH, T, HS)
        att = torch.baddbmm(self.mask[:T, :T].to(q.dtype), q, k.transpose(1, 2), alpha=1.0 / math.sqrt(HS))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = torch.bmm(att, v).view(B, NH, T, HS).transpose(1, 2).reshape(B, T, C)
        x = x + self.resid_drop(self.attn_proj(y))
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        x = x + self.resid_drop(self.mlp_proj(h))
        return x


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=1e-5)
        # GPT-2 init: N(0, 0.02), residual projections scaled by 1/sqrt(2L), zero biases.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("attn_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, head_fp32=False):
        """idx (B, T) int64 -> logits (B, T, V). Under torch.autocast the logits are bfloat16
        unless head_fp32, which computes the final LayerNorm and LM head in float32 (a teacher's
        distribution for distillation: bfloat16 logits are only good to ~0.4%)."""
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for blk in self.h:
            x = blk(x)
        if head_fp32:
            with torch.autocast("cpu", enabled=False):
                return self.ln_f(x.float()) @ self.wte.weight.t()
        return self.ln_f(x) @ self.wte.weight.t()

    def n_params(self):
        """All parameters, counting the tied embedding once."""
        return sum(p.numel() for p in self.parameters())


def gpt2_flops_per_token(cfg, T):
    """Multiply-adds for one token of inference at context length T (matmuls and attention)."""
    C, L, V = cfg.n_embd, cfg.n_layer, cfg.vocab_size
    return L * (12 * C * C + 2 * T * C) + C * V


# ---------------------------------------------------------------------------------------------
# Hugging Face names and layouts

def gpt2_hf_state(model):
    """Returns [(hf_name, fp32 numpy array)] in HF's order, Linear weights transposed to Conv1D."""
    out = [("wte.weight", model.wte.weight), ("wpe.weight", model.wpe.weight)]
    for i, b in enumerate(model.h):
        p = "h.%d." % i
        out += [(p + "ln_1.weight", b.ln_1.weight), (p + "ln_1.bias", b.ln_1.bias),
                (p + "attn.c_attn.weight", b.c_attn.weight.t()), (p + "attn.c_attn.bias", b.c_attn.bias),
                (p + "attn.c_proj.weight", b.attn_proj.weight.t()), (p + "attn.c_proj.bias", b.attn_proj.bias),
                (p + "ln_2.weight", b.ln_2.weight), (p + "ln_2.bias", b.ln_2.bias),
                (p + "mlp.c_fc.weight", b.c_fc.weight.t()), (p + "mlp.c_fc.bias", b.c_fc.bias),
                (p + "mlp.c_proj.weight", b.mlp_proj.weight.t()), (p + "mlp.c_proj.bias", b.mlp_proj.bias)]
    out += [("ln_f.weight", model.ln_f.weight), ("ln_f.bias", model.ln_f.bias)]
    return [(n, t.detach().float().contiguous().numpy()) for n, t in out]


def gpt2_load_hf_state(model, tensors):
    """Copies {hf_name: numpy array} into model, checking every shape; raises on a missing name."""
    def put(param, name, transpose=False):
        if name not in tensors:
            raise KeyError("model.safetensors: missing tensor %s" % name)
        a = torch.from_numpy(np.array(tensors[name], dtype=np.float32))  # a writable copy
        if transpose:
            a = a.t()
        if tuple(a.shape) != tuple(param.shape):
            raise ValueError("model.safetensors: tensor %s: shape %s, expected %s" %
                             (name, list(a.shape), list(param.shape)))
        with torch.no_grad():
            param.copy_(a)
    put(model.wte.weight, "wte.weight")
    put(model.wpe.weight, "wpe.weight")
    for i, b in enumerate(model.h):
        p = "h.%d." % i
        put(b.ln_1.weight, p + "ln_1.weight"); put(b.ln_1.bias, p + "ln_1.bias")
        put(b.c_attn.weight, p + "attn.c_attn.weight", True); put(b.c_attn.bias, p + "attn.c_attn.bias")
        put(b.attn_proj.weight, p + "attn.c_proj.weight", True); put(b.attn_proj.bias, p + "attn.c_proj.bias")
        put(b.ln_2.weight, p + "ln_2.weight"); put(b.ln_2.bias, p + "ln_2.bias")
        put(b.c_fc.weight, p + "mlp.c_fc.weight", True); put(b.c_fc.bias, p + "mlp.c_fc.bias")
        put(b.mlp_proj.weight, p + "mlp.c_proj.weight", True); put(b.mlp_proj.bias, p + "mlp.c_proj.bias")
    put(model.ln_f.weight, "ln_f.weight"); put(model.ln_f.bias, "ln_f.bias")


# ---------------------------------------------------------------------------------------------
# safetensors

_ST_DTYPES = {"F16": np.float16, "F32": np.float32}


def safetensors_write(path, named, dtype="F16", metadata=None):
    """Writes [(name, array)] converted to dtype (F16 or F32), in the given order."""
    np_dtype = np.dtype(_ST_DTYPES[dtype]).newbyteorder("<")
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs = []
    off = 0
    for name, arr in named:
        blob = np.ascontiguousarray(arr, dtype=np_dtype).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def safetensors_read(path):
    """Returns {name: numpy array (file dtype)}; raises ValueError on a malformed file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("%s: header length %d past end of file (%d bytes)" % (path, n, len(data)))
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<")
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[base + b:base + e], dtype=dt)
        out[name] = arr.reshape(info["shape"])
    return out


# ---------------------------------------------------------------------------------------------
# Directory

def gpt2_save_dir(model, outdir, tok_dir, generation, dtype="F16"):
    """Writes config.json, model.safetensors, generation_config.json and copies vocab/merges."""
    os.makedirs(outdir, exist_ok=True)
    cfg = model.cfg.hf_dict()
    cfg["torch_dtype"] = "float16" if dtype == "F16" else "float32"
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    safetensors_write(os.path.join(outdir, "model.safetensors"), gpt2_hf_state(model), dtype)
    gen = {"bos_token_id": model.cfg.eot_id, "eos_token_id": model.cfg.eot_id}
    gen.update(generation)
    with open(os.path.join(outdir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in ("vocab.json", "merges.txt"):
        with open(os.path.join(tok_dir, name), "rb") as src, open(os.path.join(outdir, name), "wb") as dst:
            dst.write(src.read())


def gpt2_load_dir(model_dir):
    """Returns a GPT2 in eval mode with the directory's weights (fp16 files are widened to fp32)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = GPT2Config.from_hf(json.load(f))
    model = GPT2(cfg)
    gpt2_load_hf_state(model, safetensors_read(os.path.join(model_dir, "model.safetensors")))
    model.eval()
    return model
