#!/usr/bin/python3
"""logits_compare.py: the math of tools/peer/gguf_compare.sh, over raw logit dumps.

Offline tool (/usr/bin/python3 + numpy), never run by make.

    logits_compare.py V REF.f32 CMP.f32 [--name NAME]

REF and CMP hold rows of V little-endian float32 logits, one per position, as
`tokentop score --dump-logits` and tools/peer/llama_logits --logits write them for the same
token ids. Prints one JSON line over the rows both files have:
  positions      rows compared
  mean_kl        mean over positions of KL(softmax(REF) || softmax(CMP)) in nats (float64)
  max_kl         the largest of them
  max_dp         max over positions and the whole vocabulary of |p - q|
  max_dp_top     max over positions of |p - q| at REF's five most probable tokens
  top1_agree     fraction of positions whose argmax (lowest id on ties) is the same
  ref_top1_p     mean over positions of REF's largest probability (how peaked the model is:
                 random weights give near-flat distributions, where agreement says little)
"""

import json
import sys

import numpy as np


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def compare(V, ref_path, cmp_path, chunk=64):
    ref = np.fromfile(ref_path, dtype="<f4")
    cmp_ = np.fromfile(cmp_path, dtype="<f4")
    for path, a in ((ref_path, ref), (cmp_path, cmp_)):
        if a.size == 0 or a.size % V:
            sys.exit(f"logits_compare: {path}: {a.size} floats is not a whole number of rows "
                     f"of {V}")
    n = min(ref.size, cmp_.size) // V
    ref, cmp_ = ref[:n * V].reshape(n, V), cmp_[:n * V].reshape(n, V)
    kls, dps, dps_top, agree, top1p = [], [], [], [], []
    for s in range(0, n, chunk):
        lp, lq = log_softmax(ref[s:s + chunk]), log_softmax(cmp_[s:s + chunk])
        p, q = np.exp(lp), np.exp(lq)
        kls.extend(np.maximum((p * (lp - lq)).sum(axis=1), 0.0))
        d = np.abs(p - q)
        dps.extend(d.max(axis=1))
        top = np.argsort(-p, axis=1, kind="stable")[:, :5]
        dps_top.extend(np.take_along_axis(d, top, axis=1).max(axis=1))
        agree.extend(ref[s:s + chunk].argmax(axis=1) == cmp_[s:s + chunk].argmax(axis=1))
        top1p.extend(p.max(axis=1))
    if not np.all(np.isfinite(kls)):
        sys.exit(f"logits_compare: non-finite KL between {ref_path} and {cmp_path}")
    return {"positions": n, "mean_kl": float(np.mean(kls)), "max_kl": float(np.max(kls)),
            "max_dp": float(np.max(dps)), "max_dp_top": float(np.max(dps_top)),
            "top1_agree": float(np.mean(agree)), "ref_top1_p": float(np.mean(top1p))}


def main():
    args = sys.argv[1:]
    name = None
    if "--name" in args:
        i = args.index("--name")
        name = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit("usage: logits_compare.py V REF.f32 CMP.f32 [--name NAME]")
    r = compare(int(args[0]), args[1], args[2])
    if name:
        r = {"name": name, **r}
    print(json.dumps(r))


if __name__ == "__main__":
    main()
