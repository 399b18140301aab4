"""Writes the draft's on-policy training data: text the target itself samples at its generation_config.

Usage: python3 tools/train/onpolicy.py --corpus DIR --tokenizer DIR --target MODEL_DIR \
           --tokentop ./tokentop --out DIR [--prompts N] [--samples K] [--text-rows M] [--split train]

Speculative decoding runs the draft on the target's own samples (T 0.8, top-k 50, top-p 0.95 for the
embedded pair), so the draft learns from such text (on-policy distillation, DistillSpec, Zhou et al.
2023) rather than only from the training books. Each of --prompts prompts is the opening (4-40
tokens) of a random verse of a book of --split (train: never a validation book; val: for
evaluations only); `tokentop generate` continues it with --samples parallel samples (seeds
seed+i..., the target's generation_config, EOS ignored) until the context (n_ctx tokens) is full,
and each prompt + continuation is tokenized again by the Python tokenizer into one row of n_ctx
tokens (re-encoding the text can merge a few tokens differently from the sampled ids: the
teacher's distributions are computed on the rows as stored, so they stay consistent).
--text-rows M adds M windows of n_ctx tokens of the training text itself (mixed into the rows).

Output: DIR/rows.npy (int16 [rows, n_ctx]), DIR/lens.npy (int32: the tokens of each row; the
rest is padding), DIR/rows.json (the settings, prompts, and tokentop's speed). Deterministic for
fixed settings, thread count and CPU (tokentop's sampling is, with a fixed seed).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import Tokenizer  # noqa: E402
import numpy as np  # noqa: E402

SAMPLE_HEADER = re.compile(r"^--- sample (\d+) \(seed (\d+), [a-z_]+\) ---\n", re.M)


def onpolicy_prompt(rng, books, tok, weights):
    """(prompt text, source) from the start of a random verse of a random book."""
    b = books[rng.choice(len(books), p=weights)]
    verses = [v for v in b["text"].split("\n") if v.strip()]
    v = verses[rng.integers(0, len(verses))]
    ids = tok.encode(v)
    n = int(rng.integers(4, 41))
    return tok.decode(ids[:n]), b.get("source", "kjv")


def onpolicy_generate(tokentop, target, prompt, n_new, seed, samples, threads, tmpdir):
    """The continuations of prompt: a list of `samples` strings (tokentop generate)."""
    pf = os.path.join(tmpdir, "prompt.txt")
    with open(pf, "w", encoding="utf-8") as f:
        f.write(prompt)
    # -f: the prompt as it is, no shell quoting
    cmd = [tokentop, "generate", "--model", target, "-f", pf, "-n", str(n_new), "--seed", str(seed),
           "--samples", str(samples), "--ignore-eos", "--no-context-shift", "-t", str(threads), "-q"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout.decode("utf-8", errors="replace")
    parts = SAMPLE_HEADER.split(out)
    # ['', idx, seed, text, idx, seed, text, ...]
    texts = [parts[i + 2] for i in range(1, len(parts) - 2, 3)]
    if len(texts) != samples:
        raise SystemExit("onpolicy.py: tokentop printed %d samples, expected %d (command: %s)" %
                         (len(texts), samples, " ".join(cmd)))
    return [t[:-1] if t.endswith("\n") else t for t in texts]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--target", required=True, help="the target model directory (its generation_config is used)")
    ap.add_argument("--tokentop", default="./tokentop")
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--samples", type=int, default=16, help="parallel samples per prompt")
    ap.add_argument("--text-rows", type=int, default=0, help="also this many windows of the training text")
    ap.add_argument("--split", choices=["train", "val"], default="train")
    ap.add_argument("--kjv-share", type=float, default=0.75, help="share of prompts from KJV books")
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = Tokenizer(args.tokenizer)
    with open(os.path.join(args.corpus, "books.json")) as f:
        books = [b for b in json.load(f) if b["split"] == args.split]
    if not books:
        raise SystemExit("onpolicy.py: no books of split %r in %s" % (args.split, args.corpus))
    sources = sorted({b.get("source", "kjv") for b in books})
    share = {s: (args.kjv_share if s == "kjv" else (1 - args.kjv_share) / max(1, len(sources) - 1))
             for s in sources} if len(sources) > 1 else {sources[0]: 1.0}
    size = {s: sum(len(b["text"]) for b in books if b.get("source", "kjv") == s) for s in sources}
    weights = np.array([share[b.get("source", "kjv")] * len(b["text"]) / size[b.get("source", "kjv")]
                        for b in books])
    weights /= weights.sum()
    rng = np.random.default_rng(args.seed)
    N = args.n_ctx
    rows, lens, meta = [], [], []
    t0 = time.time()
    gen_tokens = 0
    for i in range(args.prompts):
        prompt, src = onpolicy_prompt(rng, books, tok, weights)
        n_prompt = len(tok.encode(prompt))
        seed = args.seed + i * args.samples
        t1 = time.time()
        conts = onpolicy_generate(args.tokentop, args.target, prompt, N - n_prompt, seed, args.samples,
                                  args.threads, args.out)
        dt = time.time() - t1
        for c in conts:
            ids = tok.encode(prompt + c)[:N]
            lens.append(len(ids))
            rows.append(np.array(ids + [tok.eot] * (N - len(ids)), dtype=np.int16))
        gen_tokens += args.samples * (N - n_prompt)
        meta.append({"prompt": prompt, "source": src, "seed": seed, "seconds": round(dt, 2)})
        os.remove(os.path.join(args.out, "prompt.txt"))
        print("onpolicy: prompt %d/%d (%s, %d tokens): %d x %d tokens in %.1f s (%.0f tok/s)" %
              (i + 1, args.prompts, src, n_prompt, args.samples, N - n_prompt, dt,
               args.samples * (N - n_prompt) / dt))
        sys.stdout.flush()
    if args.text_rows:
        if args.split != "train":
            raise SystemExit("onpolicy.py: --text-rows needs --split train")
        # Windows of the training text itself (each book followed by <|endoftext|>; the ids cached
        # by train.py), drawn in proportion to each source's tokens.
        from train import train_load_streams
        streams, _, _ = train_load_streams(args.corpus, tok, args.tokenizer)
        ids = np.concatenate([streams[k] for k in sorted(streams)]).astype(np.int16)
        for s in rng.integers(0, len(ids) - N, args.text_rows):
            rows.append(ids[s:s + N])
            lens.append(N)
    np.save(os.path.join(args.out, "rows.npy"), np.stack(rows))
    np.save(os.path.join(args.out, "lens.npy"), np.array(lens, dtype=np.int32))
    info = {"config": vars(args), "rows": len(rows), "generated_rows": len(rows) - args.text_rows,
            "tokens": int(sum(lens)), "generated_tokens": gen_tokens,
            "seconds": round(time.time() - t0, 1), "prompts": meta}
    with open(os.path.join(args.out, "rows.json"), "w") as f:
        json.dump(info, f, indent=1)
    print("onpolicy: %d rows (%d generated), %d tokens, %.0f s" %
          (len(rows), info["generated_rows"], info["tokens"], info["seconds"]))


if __name__ == "__main__":
    main()
