#!/usr/bin/python3
"""sharpen.py: multiplies the final norm of a random model directory by K, in place.

Offline tool for tools/peer/gguf_compare.sh (/usr/bin/python3 + numpy), never run by make.

    sharpen.py HF_DIR K

A random model's next-token distribution is nearly flat, where two engines agree whatever they
do. Spreading every matrix (mkmodel --scale) sharpens it but also makes the network chaotic:
a rounding error in layer 1 grows into a different distribution, so quantization KL says more
about the chaos than about the kernels. Scaling only the final norm's weight (and bias, for
GPT-2's LayerNorm) multiplies the logits by K and leaves everything before them as it was: the
distributions get as peaked as a trained model's (K sets how much) while the hidden states keep
their sizes. The F32 or F16 tensors of model.safetensors named model.norm.weight, ln_f.weight,
ln_f.bias (with or without the transformer. prefix) are rewritten in place.
"""

import json
import struct
import sys

import numpy as np

NAMES = ("model.norm.weight", "ln_f.weight", "ln_f.bias", "transformer.ln_f.weight",
         "transformer.ln_f.bias")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: sharpen.py HF_DIR K")
    path, k = f"{sys.argv[1]}/model.safetensors", float(sys.argv[2])
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r+")
    done = []
    for name in NAMES:
        info = header.get(name)
        if info is None:
            continue
        dt = {"F32": np.float32, "F16": np.float16}.get(info["dtype"])
        if dt is None:
            sys.exit(f"{path}: tensor {name}: dtype {info['dtype']}, sharpen.py edits F32 and "
                     f"F16 only")
        a, b = info["data_offsets"]
        t = raw[8 + n + a:8 + n + b].view(dt)
        t[:] = (t.astype(np.float32) * np.float32(k)).astype(dt)
        done.append(name)
    raw.flush()
    if not done:
        sys.exit(f"{path}: no final norm ({', '.join(NAMES)})")
    print(f"{path}: {', '.join(done)} multiplied by {k}", file=sys.stderr)


if __name__ == "__main__":
    main()
