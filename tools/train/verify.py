"""Checks the trained models against tokentop and measures them; writes WORK/verify.json.

Usage: python3 tools/train/verify.py --corpus DIR --target DIR --draft DIR [--tokentop ./tokentop]
                                    [--work DIR] [--samples]

What it checks and measures (each result is printed and stored in WORK/verify.json):
  tokenizer   the Python tokenizer round-trips train.txt and val.txt; tokentop's ids for both files
              equal the Python ids (`tokentop tokenize --json`).
  perplexity  validation loss of each model on val.txt computed here (PyTorch, fp32 arithmetic on the
              stored weights) and by `tokentop score --json`, both with windows of n_ctx tokens.
  logits      the logits tokentop dumps (`tokentop score --dump-logits`) for the first LOGIT_CHUNKS
              windows of val.txt against PyTorch's: max abs difference, argmax agreement.
  acceptance  how often the draft agrees with the target, measured here: greedy (the draft's argmax
              equals the target's, along greedy target continuations of prompts from val.txt) and at
              temperature 0.8 (sum_x min(p(x), q(x)) along target samples at 0.8), and, when the
              tokentop binary has speculative decoding, its own acceptance statistics.
  cost        multiply-adds per token of each model at full context, and their ratio.
  samples     (--samples) continuations at a few temperatures from tokentop generate.
Without --tokentop (or when it is missing) only the Python side runs, and the token ids and logits
are left in WORK/verify/ for a later comparison.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import Tokenizer  # noqa: E402
from gpt2 import gpt2_flops_per_token, gpt2_load_dir  # noqa: E402
from train import score_stream, score_windows  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LOGIT_CHUNKS = 4
PROMPTS = ["In the beginning", "And Jesus said unto them,", "The LORD is my shepherd;",
           "Blessed are the", "And it came to pass, when"]


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode()[-2000:]))
    return p.stdout


@torch.no_grad()
def torch_logits_windows(model, ids, T, n_windows):
    """Logits (rows, V) for the first n_windows windows of ids, as `tokentop score` dumps them."""
    rows = []
    for s, e in score_windows(len(ids), T)[:n_windows]:
        x = torch.from_numpy(np.asarray(ids[s:e - 1], dtype=np.int64)[None])
        rows.append(model(x)[0].numpy())
    return np.concatenate(rows)


@torch.no_grad()
def acceptance(target, draft, prompts_ids, n_new, temperature, seed):
    """Returns (mean acceptance, positions) along continuations the target generates from the
    prompts (all the same length; greedy at temperature 0, else sampled at that temperature):
    greedy: the fraction of positions where the draft's argmax equals the target's;
    sampled: the mean over positions of sum_x min(p(x), q(x)), p and q the two models'
    temperature-scaled distributions (the probability that speculative sampling accepts a
    draft token there)."""
    g = torch.Generator().manual_seed(seed)
    seq = torch.tensor(prompts_ids, dtype=torch.int64)       # (B, P)
    P = seq.shape[1]
    assert P + n_new <= min(target.cfg.n_positions, draft.cfg.n_positions)
    for _ in range(n_new):
        lp = target(seq)[:, -1]
        if temperature == 0:
            nxt = lp.argmax(-1, keepdim=True)
        else:
            nxt = torch.multinomial(F.softmax(lp / temperature, -1), 1, generator=g)
        seq = torch.cat([seq, nxt], 1)
    # Teacher-forced: the distributions for every generated position in one pass each.
    lp = target(seq[:, :-1])[:, P - 1:]
    lq = draft(seq[:, :-1])[:, P - 1:]
    if temperature == 0:
        acc = (lp.argmax(-1) == lq.argmax(-1)).double()
    else:
        acc = torch.minimum(F.softmax(lp / temperature, -1), F.softmax(lq / temperature, -1)).sum(-1).double()
    return float(acc.mean()), acc.numel()


def tokentop_speculative(tt, target_dir, draft_dir, prompts, n_new, temperature, gamma, seed=1):
    """tokentop generate --draft over the prompts; returns summed speculative statistics.
    Sampling is pure temperature (top-k and top-p off) so the numbers compare with the Python ones;
    temperature None keeps the models' generation_config (T 0.8, top-k 50, top-p 0.95: what a
    user gets, and issue 11's acceptance goal)."""
    tot = {"prompts": len(prompts), "rounds": 0, "drafted": 0, "accepted": 0, "generated": 0}
    for text in prompts:
        cmd = [tt, "generate", "--model", target_dir, "--draft", draft_dir, "-p", text, "--json",
               "-n", str(n_new), "--ignore-eos", "--gamma", str(gamma), "--seed", str(seed)]
        if temperature is not None:
            cmd += ["--top-k", "0", "--top-p", "1", "--repeat", "1"]
            cmd += ["--greedy"] if temperature == 0 else ["--temp", str(temperature)]
        last = json.loads(run(cmd).decode().strip().split("\n")[-1])
        for k in ("rounds", "drafted", "accepted"):
            tot[k] += last[k]
        tot["generated"] += last["generated_tokens"]
    tot["accepted_per_drafted"] = tot["accepted"] / tot["drafted"]
    tot["tokens_per_target_pass"] = tot["generated"] / tot["rounds"]
    return tot


def tokentop_decode_speed(tt, model_dir, reps=3):
    """Median plain decode tokens/s of `tokentop generate` (greedy, 128 tokens, no draft)."""
    speeds = []
    for _ in range(reps):
        last = run([tt, "generate", "--model", model_dir, "-p", "In the beginning", "--json", "-n", "128",
                    "--ignore-eos", "--greedy"]).decode().strip().split("\n")[-1]
        speeds.append(json.loads(last)["decode_tok_s"])
    return sorted(speeds)[len(speeds) // 2]


def tokentop_samples(tt, model_dir, prompts, temps, n_new, seed=1):
    """[(prompt, temperature, text)] from tokentop generate (pure temperature, top-k/top-p off)."""
    out = []
    for prompt in prompts:
        for t in temps:
            cmd = [tt, "generate", "--model", model_dir, "-p", prompt, "-n", str(n_new), "-q", "--seed", str(seed),
                   "--top-k", "0", "--top-p", "1", "--repeat", "1"]
            cmd += ["--greedy"] if t == 0 else ["--temp", str(t)]
            out.append((prompt, t, run(cmd).decode("utf-8", errors="replace")))
    return out


def write_check(out_dir, books, tok, models):
    """The reference values tests/e2e/kjv_models.sh compares tokentop with (no Python at test time):
    the first chapter of the first validation book, its ids, and each model's mean NLL over it."""
    book = next(b for b in books if b["split"] == "val")
    text = book["text"].split("\n\n", 1)[0]
    ids = tok.encode(text)
    with open(os.path.join(out_dir, "kjv-excerpt.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    lines = ["# Reference values for tests/e2e/kjv_models.sh, written by tools/train/verify.py",
             "# (PyTorch, fp32 arithmetic on the stored weights; windows of n_ctx tokens as tokentop score).",
             "ids\t" + json.dumps(ids, separators=(",", ":"))]
    for role in ("target", "draft"):
        m = models[role]
        nll, count = score_stream(m, np.array(ids, dtype=np.int64), m.cfg.n_positions)
        lines.append("%s_mean_nll\t%.9f" % (role, nll))
        lines.append("%s_predicted\t%d" % (role, count))
    with open(os.path.join(out_dir, "kjv-check.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("verify: wrote %s/kjv-excerpt.txt (%d tokens) and kjv-check.tsv" % (out_dir, len(ids)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--tokentop", default=None)
    ap.add_argument("--work", default="tools/train/work")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--acceptance-tokens", type=int, default=200, help="continuation length per prompt")
    ap.add_argument("--samples", action="store_true")
    ap.add_argument("--write-check", default=None, metavar="DIR",
                    help="write DIR/kjv-excerpt.txt and DIR/kjv-check.tsv for tests/e2e/kjv_models.sh")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out_dir = os.path.join(args.work, "verify")
    os.makedirs(out_dir, exist_ok=True)
    tt = args.tokentop if args.tokentop and os.access(args.tokentop, os.X_OK) else None
    if args.tokentop and not tt:
        print("verify: %s is not an executable; Python side only" % args.tokentop)
    res = {"tokentop": bool(tt)}

    # -- tokenizer ------------------------------------------------------------------------------
    for name in ("vocab.json", "merges.txt"):
        with open(os.path.join(args.target, name), "rb") as a, open(os.path.join(args.draft, name), "rb") as b:
            if a.read() != b.read():
                raise SystemExit("verify: %s differs between %s and %s" % (name, args.target, args.draft))
    tok = Tokenizer(args.target)
    texts, ids = {}, {}
    for split in ("train", "val"):
        path = os.path.join(args.corpus, split + ".txt")
        with open(path, encoding="utf-8") as f:
            texts[split] = f.read()
        ids[split] = tok.encode(texts[split])
        assert tok.decode(ids[split]) == texts[split], "%s.txt does not round-trip" % split
        np.save(os.path.join(out_dir, split + "_ids.npy"), np.array(ids[split], dtype=np.int32))
        r = {"bytes": len(texts[split].encode()), "tokens": len(ids[split]), "python_roundtrip": True}
        if tt:
            c_ids = json.loads(run([tt, "tokenize", "--model", args.target, "-f", path, "--json"]))
            r["tokentop_equal"] = c_ids == ids[split]
            if not r["tokentop_equal"]:
                k = next((i for i, (a, b) in enumerate(zip(c_ids, ids[split])) if a != b), min(len(c_ids), len(ids[split])))
                r["first_difference"] = k
            r["tokentop_roundtrip"] = tok.decode(c_ids) == texts[split]
        res["tokenizer_" + split] = r
        print("tokenizer %s.txt: %s" % (split, json.dumps(r)))

    # -- per model: perplexity, logits, cost ------------------------------------------------------
    val_path = os.path.join(args.corpus, "val.txt")
    models = {}
    for role, d in (("target", args.target), ("draft", args.draft)):
        m = gpt2_load_dir(d)
        models[role] = m
        T = m.cfg.n_positions
        val_ids = np.array(ids["val"], dtype=np.int64)
        nll, count = score_stream(m, val_ids, T)
        val_bytes = len(texts["val"].encode())
        # Bits per byte: the total NLL in bits over the bytes of val.txt (issue 11's measure, with
        # windows of 256 tokens as `tokentop score --chunk 255`, and with the full context).
        nll255, count255 = score_stream(m, val_ids, 255)
        r = {"dir": d, "params": m.n_params(), "n_layer": m.cfg.n_layer, "n_head": m.cfg.n_head,
             "n_embd": m.cfg.n_embd, "n_ctx": T, "macs_per_token": gpt2_flops_per_token(m.cfg, T),
             "python_val_nll": nll, "python_val_ppl": math.exp(nll), "val_predicted": count,
             "val_bits_per_byte": nll * count / math.log(2) / val_bytes,
             "python_val_nll_chunk255": nll255,
             "val_bits_per_byte_chunk255": nll255 * count255 / math.log(2) / val_bytes}
        # The logits of the first windows, also for a later comparison without tokentop.
        ref = torch_logits_windows(m, val_ids, T, LOGIT_CHUNKS)
        np.save(os.path.join(out_dir, role + "_logits_head.npy"), ref)
        if tt:
            t0 = time.time()
            sc = json.loads(run([tt, "score", "--model", d, "-f", val_path, "--json"]))
            r["tokentop_score_seconds"] = round(time.time() - t0, 2)
            r["tokentop_val_nll"] = sc["mean_nll"]
            r["tokentop_val_ppl"] = sc["perplexity"]
            r["tokentop_predicted"] = sc["predicted"]
            r["val_nll_abs_diff"] = abs(sc["mean_nll"] - nll)
            r["val_ppl_rel_diff"] = abs(sc["perplexity"] - math.exp(nll)) / math.exp(nll)
            sc = json.loads(run([tt, "score", "--model", d, "-f", val_path, "--chunk", "255", "--json"]))
            r["tokentop_val_bits_per_byte_chunk255"] = sc["mean_nll"] * sc["predicted"] / math.log(2) / val_bytes
            # A prefix of val.txt long enough for LOGIT_CHUNKS windows, cut after a line.
            need = LOGIT_CHUNKS * T + 1
            cut = len(tok.decode(val_ids[:need]))
            cut = texts["val"].index("\n", cut) + 1
            head_path = os.path.join(out_dir, "val_head.txt")
            with open(head_path, "w", encoding="utf-8") as f:
                f.write(texts["val"][:cut])
            head_ids = np.array(tok.encode(texts["val"][:cut]), dtype=np.int64)
            ref = torch_logits_windows(m, head_ids, T, LOGIT_CHUNKS)
            dump = os.path.join(out_dir, role + "_tokentop_logits.f32")
            run([tt, "score", "--model", d, "-f", head_path, "--chunk", str(T), "--dump-logits", dump, "--json"])
            got = np.fromfile(dump, dtype="<f4").reshape(-1, m.cfg.vocab_size)[:len(ref)]
            if got.shape != ref.shape:
                raise SystemExit("verify: %s: tokentop dumped %s logits, expected %s" % (role, got.shape, ref.shape))
            diff = np.abs(got - ref)
            r["logits_positions"] = int(ref.shape[0])
            r["logits_max_abs_diff"] = float(diff.max())
            r["logits_mean_abs_diff"] = float(diff.mean())
            r["logits_max_abs"] = float(np.abs(ref).max())
            r["logits_argmax_agree"] = float((got.argmax(1) == ref.argmax(1)).mean())
            os.remove(dump)
        res[role] = r
        print("%s: %s" % (role, json.dumps(r)))
    res["cost_ratio_macs"] = res["target"]["macs_per_token"] / res["draft"]["macs_per_token"]
    print("cost: target/draft multiply-adds per token at full context: %.2f" % res["cost_ratio_macs"])

    # -- acceptance -------------------------------------------------------------------------------
    # Prompts: the first line of each validation book (text the models were not trained on), cut to
    # its first 8 tokens.
    with open(os.path.join(args.corpus, "books.json")) as f:
        books = json.load(f)
    prompts_ids = [tok.encode(b["text"].split("\n", 1)[0])[:8] for b in books if b["split"] == "val"]
    assert all(len(p) == 8 for p in prompts_ids), "a validation book opens with a verse under 8 tokens"
    acc = {}
    for temp in (0.0, 0.8):
        a, n = acceptance(models["target"], models["draft"], prompts_ids, args.acceptance_tokens, temp, seed=1)
        acc["python_T%.1f" % temp] = {"acceptance": a, "positions": n}
        print("acceptance (python, T=%.1f): %.4f over %d positions" % (temp, a, n))
    if tt:
        prompt_texts = [tok.decode(p) for p in prompts_ids]
        for temp in (0.0, 0.8):
            for gamma in (1, 4):
                r = tokentop_speculative(tt, args.target, args.draft, prompt_texts, args.acceptance_tokens, temp, gamma)
                acc["tokentop_T%.1f_gamma%d" % (temp, gamma)] = r
                print("acceptance (tokentop generate --draft, T=%.1f, gamma %d): %s" % (temp, gamma, json.dumps(r)))
        for gamma in (1, 4):
            r = tokentop_speculative(tt, args.target, args.draft, prompt_texts, args.acceptance_tokens, None, gamma)
            acc["tokentop_defaults_gamma%d" % gamma] = r
            print("acceptance (tokentop generate --draft, generation_config defaults, gamma %d): %s" %
                  (gamma, json.dumps(r)))
        speed = {role: tokentop_decode_speed(tt, d) for role, d in (("target", args.target), ("draft", args.draft))}
        speed["ratio"] = speed["draft"] / speed["target"]
        res["tokentop_decode_tok_s"] = speed
        print("decode speed (tokentop, median of 3): %s" % json.dumps(speed))
    res["acceptance"] = acc

    if tt and args.samples:
        samples = {role: tokentop_samples(tt, d, PROMPTS[:3], (0.0, 0.7, 1.0), 60)
                   for role, d in (("target", args.target), ("draft", args.draft))}
        res["samples"] = samples
        with open(os.path.join(out_dir, "samples.md"), "w") as f:
            for role, rows in samples.items():
                for prompt, t, text in rows:
                    f.write("%s, %s:\n\n```\n%s%s\n```\n\n" % (role, "greedy" if t == 0 else "T %.1f" % t, prompt, text))
        print("verify: samples in %s" % os.path.join(out_dir, "samples.md"))

    if args.write_check:
        write_check(args.write_check, books, tok, models)

    with open(os.path.join(args.work, "verify.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("verify: wrote %s" % os.path.join(args.work, "verify.json"))


if __name__ == "__main__":
    main()
