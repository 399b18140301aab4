#!/usr/bin/python3
"""gelu_probe.py: which GELU explains an engine's GPT-2 logits (tools/peer/gguf_compare.sh).

Offline tool (/usr/bin/python3 + numpy), never run by make.

    gelu_probe.py HF_DIR IDS T DUMP.f32 [DUMP.f32...]

Runs tools/ref/gpt2_ref.py's float64 GPT-2 on the first T+1 of IDS (comma-separated) twice:
with the exact tanh GELU, and with ggml's CPU one (GGML_GELU_FP16 in ggml-cpu/vec.h: the input
rounded to fp16, the result read from a table of fp16 values, exact beyond +-10), and prints
how far each dump (`tokentop score --dump-logits`, `llama_logits --logits`, same ids) is from
each. On the random GPT-2 of gguf_compare.sh (512 positions) llama.cpp's F32 probabilities
were 1.3e-3 from tokentop's; against the references over 128 positions tokentop was 4.7e-6
from the exact GELU and 9.7e-4 from the table, llama.cpp 9.8e-4 and 1.2e-4: the difference is
llama.cpp's fp16 GELU table, not a tokentop error.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
sys.path.insert(0, HERE)
import gpt2_ref  # noqa: E402
import logits_compare  # noqa: E402


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: gelu_probe.py HF_DIR IDS T DUMP.f32 [DUMP.f32...]")
    d, ids_csv, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ids = np.array([int(x) for x in ids_csv.split(",")][:T])
    cfg, w, _ = gpt2_ref.load_model(d, "fp32")
    exact = gpt2_ref.gelu

    def table(x, act):
        y = exact(x.astype(np.float16).astype(np.float64), act).astype(np.float16)
        return np.where(x <= -10, 0.0, np.where(x >= 10, x, y.astype(np.float64)))

    refs = {}
    for name, g in (("exact", exact), ("fp16 table", table)):
        gpt2_ref.gelu = g
        path = f"/tmp/gelu_probe-{os.getpid()}-{name.replace(' ', '_')}.f32"
        gpt2_ref.forward(cfg, w, ids).astype("<f4").tofile(path)
        refs[name] = path
    V = cfg["vocab_size"]
    try:
        for dump in sys.argv[4:]:
            for name, path in refs.items():
                r = logits_compare.compare(V, path, dump)
                print(f"{dump}: against the float64 reference with the {name} GELU: max |dp| "
                      f"{r['max_dp']:.2e}, mean KL {r['mean_kl']:.2e} over {r['positions']} "
                      f"positions")
    finally:
        for path in refs.values():
            os.remove(path)


if __name__ == "__main__":
    main()
