#!/usr/bin/python3
"""beam_ref.py: an independent float64 beam search (numpy only) that writes expected beams.

It runs the float64 GPT-2 of gpt2_ref.py (no cache: every step recomputes each beam's whole
sequence) and implements the beam search semantics of core/decode/beam.h from their statement, sharing no
code with tokentop:

  token score    log-softmax (float64) of the logits after EOS masking (before --min-tokens),
                 the repetition / presence / frequency penalties over the beam's last `window`
                 tokens (prompt included; -1 all) and the no-repeat-n-gram mask
  ranking        summed logprob descending, then token id ascending, then beam index ascending;
                 the best 2N candidates walked in order: EOS ranked < N ends a hypothesis
                 (score = logprob / len ** length_penalty, len counting the EOS), other EOS are
                 dropped, other tokens continue until N beams run
  hypotheses     at most N; when full a new one replaces the worst (lowest score, the latest of
                 equal ones) only when its score is higher
  done           N hypotheses and (early_stopping or best running logprob / t ** lp <= worst score)
  at max tokens  running beams become hypotheses of length max_new (no EOS)
  result         by score descending, ties to the earlier finished; the first num_return

--eos auto picks the token greedy decoding takes at step 2 (so EOS really happens); -1: no EOS.

Usage:
  beam_ref.py MODEL_DIR --ids 1,2,3 --beams N [--lp X] [--ngram N] [--early] [--return N]
              [--max-new T] [--min-tokens M] [--repeat R] [--presence P] [--frequency F]
              [--window W] [--eos ID|auto|-1] [--name NAME] [--out FILE]
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_ref import fnv1a64, forward, load_model, write_text  # noqa: E402


def penalized(logits, hist, a, eos, t):
    z = logits.astype(np.float32).astype(np.float64)   # tokentop's logits are float
    z = z.copy()
    if eos >= 0 and t < a.min_tokens:
        z[eos] = -np.inf
    if a.window != 0 and (a.repeat != 1 or a.presence != 0 or a.frequency != 0):
        win = hist if a.window < 0 else hist[-a.window:]
        counts = {}
        for tok in win:
            counts[tok] = counts.get(tok, 0) + 1
        for tok, c in counts.items():
            if z[tok] == -np.inf:
                continue
            v = z[tok]
            if a.repeat != 1:
                v = v / a.repeat if v > 0 else v * a.repeat
            v -= c * a.frequency + a.presence
            z[tok] = v
    n = a.ngram
    if n > 0 and len(hist) >= n - 1:
        prefix = hist[len(hist) - (n - 1):] if n > 1 else []
        for i in range(0, len(hist) - n + 1):
            if hist[i:i + n - 1] == prefix:
                z[hist[i + n - 1]] = -np.inf
    finite = z[np.isfinite(z)]
    m = finite.max()
    lse = m + math.log(np.exp(finite - m).sum())
    return z - lse


def beam_search(cfg, w, prompt, a, eos):
    N, T = a.beams, a.max_new
    running = [([], 0.0)]                 # (generated ids, logprob), best first
    fin = []                              # [score, serial, ids, logprob, eos]
    serial = 0

    def add(ids, logprob, is_eos):
        nonlocal serial
        score = logprob / (len(ids) ** a.lp)
        if len(fin) == N:
            worst = min(range(N), key=lambda i: (fin[i][0], -fin[i][1]))
            if not score > fin[worst][0]:
                return
            del fin[worst]
        fin.append([score, serial, list(ids), logprob, is_eos])
        serial += 1

    t = 0
    while True:
        cands = []
        for k, (gen, lp) in enumerate(running):
            hist = list(prompt) + gen
            logits = forward(cfg, w, np.array(hist))[-1]
            scores = penalized(logits, hist, a, eos, t)
            for tok in range(len(scores)):
                if np.isfinite(scores[tok]):
                    cands.append((-(lp + scores[tok]), tok, k))
        cands.sort()
        cands = cands[:2 * N]
        nxt = []
        for r, (neg, tok, k) in enumerate(cands):
            if len(nxt) == N:
                break
            gen = running[k][0]
            if eos >= 0 and tok == eos:
                if r < N:
                    add(gen + [tok], -neg, True)
                continue
            nxt.append((gen + [tok], -neg))
        t += 1
        done = False
        if len(fin) == N:
            best = nxt[0][1] / (t ** a.lp) if nxt else -math.inf
            worst = min(f[0] for f in fin)
            done = a.early or best <= worst
        if not nxt:
            done = True
        if done or t == T:
            if not done:
                for gen, lp in nxt:
                    add(gen, lp, False)
            break
        running = nxt
    fin.sort(key=lambda f: (-f[0], f[1]))
    return fin[:a.ret or N]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--beams", type=int, required=True)
    ap.add_argument("--lp", type=float, default=1.0)
    ap.add_argument("--ngram", type=int, default=0)
    ap.add_argument("--early", action="store_true")
    ap.add_argument("--return", dest="ret", type=int, default=0)
    ap.add_argument("--max-new", type=int, default=8)
    ap.add_argument("--min-tokens", type=int, default=0)
    ap.add_argument("--repeat", type=float, default=1.0)
    ap.add_argument("--presence", type=float, default=0.0)
    ap.add_argument("--frequency", type=float, default=0.0)
    ap.add_argument("--window", type=int, default=-1)
    ap.add_argument("--eos", default="auto")
    ap.add_argument("--name")
    ap.add_argument("--out")
    a = ap.parse_args()
    prompt = [int(t) for t in a.ids.split(",")]
    cfg, w, blob = load_model(a.model, "fp32")
    if a.eos == "auto":
        l1 = forward(cfg, w, np.array(prompt))[-1]
        g1 = int(np.argmax(l1))
        eos = int(np.argmax(forward(cfg, w, np.array(prompt + [g1]))[-1]))
    else:
        eos = int(a.eos)
    hyps = beam_search(cfg, w, prompt, a, eos)
    lines = ["tokentop-beams 1",
             "model %s" % (a.name or os.path.basename(os.path.normpath(a.model))),
             "safetensors_fnv1a64 %016x" % fnv1a64(blob),
             "ids %d %s" % (len(prompt), " ".join(str(i) for i in prompt)),
             "options beams %d lp %.9g ngram %d early %d return %d max_new %d min_tokens %d "
             "repeat %.9g presence %.9g frequency %.9g window %d eos %d" % (
                 a.beams, a.lp, a.ngram, int(a.early), a.ret, a.max_new, a.min_tokens, a.repeat,
                 a.presence, a.frequency, a.window, eos)]
    for score, _, ids, logprob, is_eos in hyps:
        lines.append("hyp score %.12g logprob %.12g eos %d n %d %s" % (
            score, logprob, int(is_eos), len(ids), " ".join(str(i) for i in ids)))
    write_text("\n".join(lines) + "\n", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
