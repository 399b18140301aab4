#!/usr/bin/python3
"""check_dequant.py: core/model/quant.c's dequantization against llama.cpp's own Python reference
(gguf-py's gguf.quants.dequantize) on random blocks of every type tokentop reads; prints the
largest difference per type (0 expected: the arithmetic is the same, in fp32). Offline tool,
never run by make.

    tools/peer/check_dequant.py LLAMA_CPP_DIR [FILE.gguf...]   (the clone holding gguf-py/)

Builds core/model/quant.c as a shared library with cc into a temporary directory and calls it
through ctypes. Without files: random blocks (scales, fp16 d and dmin, drawn finite; quants random
bytes). With files (e.g. what llama-quantize writes: Q4_K_M mixes Q4_K and Q6_K): every tensor of
a type tokentop reads, dequantized both ways.
"""

import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check_files(lib, paths):
    """Every supported tensor of each file through both dequantizers; the worst difference."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    worst = 0.0
    for path in paths:
        counts, diff = {}, 0.0
        for t in GGUFReader(path).tensors:
            raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
            out = np.zeros(int(t.n_elements), dtype=np.float32)
            if not lib.quant_dequantize_row(int(t.tensor_type), raw.ctypes.data, out.ctypes.data,
                                            out.size):
                print(f"{path}: {t.name}: {t.tensor_type.name} not read by tokentop (skipped)")
                continue
            ref = dequantize(t.data, t.tensor_type).reshape(-1).astype(np.float32)
            diff = max(diff, float(np.max(np.abs(out - ref))) if out.size else 0.0)
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
        print(f"{path}: {counts}: max |tokentop - gguf-py| = {diff:g}")
        worst = max(worst, diff)
    return worst


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.path.insert(0, os.path.join(sys.argv[1], "gguf-py"))
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as Q
    from gguf.quants import dequantize

    tmp = tempfile.mkdtemp()
    so = os.path.join(tmp, "libquant.so")
    subprocess.check_call(["cc", "-O1", "-shared", "-fPIC", "-I", ROOT,
                           os.path.join(ROOT, "core/model/quant.c"), "-o", so])
    lib = ctypes.CDLL(so)
    lib.quant_dequantize_row.restype = ctypes.c_bool
    lib.quant_dequantize_row.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_uint64]
    lib.quant_block_bytes.restype = ctypes.c_uint32
    if len(sys.argv) > 2:
        sys.exit(0 if check_files(lib, sys.argv[2:]) == 0 else 1)
    rng = np.random.default_rng(7)
    worst = 0.0
    # (type, byte offsets of the fp16 scales in a block)
    for t, scales in [(Q.Q8_0, [0]), (Q.Q4_0, [0]), (Q.Q5_0, [0]), (Q.Q4_K, [0, 2]),
                      (Q.Q6_K, [208]), (Q.F16, []), (Q.BF16, [])]:
        blk, nbytes = GGML_QUANT_SIZES[t]
        if lib.quant_block_bytes(int(t)) != nbytes:
            sys.exit(f"{t.name}: block bytes {lib.quant_block_bytes(int(t))}, gguf-py {nbytes}")
        nb = 256
        n = nb * blk
        if t == Q.F16:
            raw = rng.normal(size=n).astype(np.float16).view(np.uint8)
        elif t == Q.BF16:
            f = rng.normal(size=n).astype(np.float32)
            raw = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
        else:
            raw = rng.integers(0, 256, size=nb * nbytes, dtype=np.uint8)
            for i in range(nb):
                for at in scales:
                    raw[i * nbytes + at:i * nbytes + at + 2] = \
                        np.frombuffer(np.float16(rng.normal()).tobytes(), np.uint8)
        ref = dequantize(raw, t).reshape(-1).astype(np.float32)
        out = np.zeros(n, dtype=np.float32)
        if not lib.quant_dequantize_row(int(t), raw.ctypes.data, out.ctypes.data, n):
            sys.exit(f"{t.name}: refused")
        diff = float(np.max(np.abs(out - ref)))
        worst = max(worst, diff)
        print(f"{t.name:5s} {nb} blocks: max |tokentop - gguf-py| = {diff:g}")
    sys.exit(0 if worst == 0 else 1)


if __name__ == "__main__":
    main()
