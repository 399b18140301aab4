"""Trains one GPT-2 model on the KJV corpus and writes it in the Hugging Face layout.

Usage: python3 tools/train/train.py --corpus DIR --tokenizer DIR --out MODEL_DIR [options]
       (see --help; tools/train/train.mk holds the settings used for models/kjv-*)

A nanoGPT-style loop: random windows of block_size+1 tokens from the training stream (each book's
tokens followed by <|endoftext|>), AdamW (betas 0.9/0.95, weight decay on matrices only), linear
warmup then cosine decay to min_lr, gradient clipping at 1.0, fixed seeds (torch and numpy). The
length of a run is a number of iterations, not a wall-clock budget, so it is reproducible.

Validation loss is measured the way `tokentop score` measures a file: val.txt is tokenized as one
stream and cut into consecutive windows of block_size+1 tokens that overlap by one token, so every
token but the first is predicted exactly once, from the tokens before it in its window (at most
block_size - 1 of them). The model with the best validation loss over the evaluations is the one
written (as fp16 or fp32 safetensors); the log records every evaluation.
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # threads that spin starve a shared 2-core box

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import Tokenizer  # noqa: E402
from gpt2 import GPT2, GPT2Config, gpt2_flops_per_token, gpt2_save_dir  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

GENERATION = {"do_sample": True, "temperature": 0.8, "top_k": 50, "top_p": 0.95,
              "max_new_tokens": 200, "repetition_penalty": 1.0}


def train_load_streams(corpus_dir, tok):
    """Returns (train ids with <|endoftext|> after each book, val ids of val.txt) as int64 arrays."""
    with open(os.path.join(corpus_dir, "books.json")) as f:
        books = json.load(f)
    train = []
    for b in books:
        if b["split"] == "train":
            train.extend(tok.encode(b["text"]))
            train.append(tok.eot)
    with open(os.path.join(corpus_dir, "val.txt"), encoding="utf-8") as f:
        val = tok.encode(f.read())
    return np.array(train, dtype=np.int64), np.array(val, dtype=np.int64)


def score_windows(n_tokens, T):
    """[(start, end)] windows of at most T+1 tokens overlapping by one; each predicts end-start-1."""
    out = []
    s = 0
    while s < n_tokens - 1:
        e = min(s + T + 1, n_tokens)
        out.append((s, e))
        s = e - 1
    return out


@torch.no_grad()
def score_stream(model, ids, T, batch=16):
    """Mean NLL (nats/token) over ids, windows as in score_windows; returns (mean, count)."""
    model.eval()
    total, count = 0.0, 0
    wins = score_windows(len(ids), T)
    full = [w for w in wins if w[1] - w[0] == T + 1]
    rest = [w for w in wins if w[1] - w[0] != T + 1]
    for i in range(0, len(full), batch):
        chunk = np.stack([ids[s:e] for s, e in full[i:i + batch]])
        x = torch.from_numpy(chunk[:, :-1])
        y = torch.from_numpy(chunk[:, 1:])
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    for s, e in rest:
        x = torch.from_numpy(ids[s:e - 1][None])
        y = torch.from_numpy(ids[s + 1:e][None])
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    return total / count, count


def lr_at(it, args):
    if it < args.warmup_iters:
        return args.lr * (it + 1) / args.warmup_iters
    frac = (it - args.warmup_iters) / max(1, args.max_iters - args.warmup_iters)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1.0 + math.cos(math.pi * min(1.0, frac)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True, help="directory with vocab.json + merges.txt")
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--work", default=None, help="checkpoint directory (default OUT.work)")
    ap.add_argument("--n-layer", type=int, default=6)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--block-size", type=int, default=256, help="context length = n_positions")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--dropout", type=float, default=0.0, help="residual and embedding dropout")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup-iters", type=int, default=100)
    ap.add_argument("--max-iters", type=int, default=2000)
    ap.add_argument("--eval-interval", type=int, default=250)
    ap.add_argument("--log-interval", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["F16", "F32"], default="F16")
    ap.add_argument("--resume", action="store_true", help="continue from WORK/ckpt.pt")
    args = ap.parse_args()
    work = args.work or args.out.rstrip("/") + ".work"
    os.makedirs(work, exist_ok=True)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    tok = Tokenizer(args.tokenizer)
    train_ids, val_ids = train_load_streams(args.corpus, tok)
    V = len(tok.vocab)
    T = args.block_size
    cfg = GPT2Config(V, T, args.n_embd, args.n_layer, args.n_head, dropout=args.dropout, eot_id=tok.eot)
    model = GPT2(cfg)
    # The mask is a buffer: attention dropout is left out (it costs a Bernoulli draw per score).
    for blk in model.h:
        blk.attn_drop.p = 0.0
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    print("config: %s" % json.dumps(vars(args), sort_keys=True))
    print("data: train %d tokens, val %d tokens, vocab %d, eot %d" % (len(train_ids), len(val_ids), V, tok.eot))
    print("model: %d layers, %d heads, C %d, T %d: %d parameters (%d without wte/wpe); "
          "%.2fM multiply-adds per token at T=%d" %
          (cfg.n_layer, cfg.n_head, cfg.n_embd, T, model.n_params(),
           model.n_params() - model.wte.weight.numel() - model.wpe.weight.numel(),
           gpt2_flops_per_token(cfg, T) / 1e6, T))
    sys.stdout.flush()

    it0, best, elapsed0, history, resumed = 0, float("inf"), 0.0, [], False
    ckpt_path = os.path.join(work, "ckpt.pt")
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        torch.set_rng_state(ck["torch_rng"])
        rng.bit_generator.state = ck["np_rng"]
        it0, best, elapsed0, history = ck["iter"], ck["best"], ck["elapsed"], ck["history"]
        resumed = True  # the checkpoint was taken right after the evaluation at it0
        print("resume: iteration %d, best val %.4f, %.0f s trained" % (it0, best, elapsed0))

    train_time = elapsed0          # seconds spent in training steps (evaluations excluded)
    cpu0 = time.process_time()     # CPU seconds of this process, all threads (evaluations included)
    wall0 = time.time()
    window_time, window_iters = 0.0, 0
    tokens_per_iter = args.batch_size * T
    for it in range(it0, args.max_iters + 1):
        if (it % args.eval_interval == 0 or it == args.max_iters) and not (resumed and it == it0):
            val_loss, n_val = score_stream(model, val_ids, T)
            erng = np.random.default_rng(0)  # the same 64 training windows every time
            starts = erng.integers(0, len(train_ids) - T - 1, 64)
            tr_ids = np.concatenate([train_ids[s:s + T + 1] for s in starts])
            train_loss, _ = score_stream(model, tr_ids, T)
            model.train()
            rec = {"iter": it, "tokens": it * tokens_per_iter, "epochs": it * tokens_per_iter / len(train_ids),
                   "train_loss": train_loss, "val_loss": val_loss, "val_ppl": math.exp(val_loss),
                   "val_tokens": n_val, "train_seconds": round(train_time, 1)}
            history.append(rec)
            mark = ""
            if val_loss < best:
                best = val_loss
                gpt2_save_dir(model, args.out, args.tokenizer, GENERATION, args.dtype)
                mark = " (saved)"
            print("eval %5d: train %.4f  val %.4f  ppl %.2f  epochs %.2f  %.0f s%s" %
                  (it, train_loss, val_loss, math.exp(val_loss), rec["epochs"], train_time, mark))
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "iter": it,
                        "best": best, "elapsed": train_time, "history": history,
                        "torch_rng": torch.get_rng_state(), "np_rng": rng.bit_generator.state}, ckpt_path)
            with open(os.path.join(work, "history.json"), "w") as f:
                json.dump(history, f, indent=1)
            sys.stdout.flush()
            if it == args.max_iters:
                break
        t0 = time.time()
        lr = lr_at(it, args)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train_ids) - T - 1, args.batch_size)
        chunk = np.stack([train_ids[s:s + T + 1] for s in starts])
        x = torch.from_numpy(chunk[:, :-1])
        y = torch.from_numpy(chunk[:, 1:])
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.time() - t0
        train_time += dt
        window_time += dt
        window_iters += 1
        if it % args.log_interval == 0:
            print("iter %5d: loss %.4f  lr %.2e  %.0f ms/iter  %.0f tok/s  %.0f s  (cpu %.0f s, load %.1f)" %
                  (it, loss.item(), lr, window_time / window_iters * 1000,
                   window_iters * tokens_per_iter / window_time, train_time,
                   time.process_time() - cpu0, os.getloadavg()[0]))
            sys.stdout.flush()
            window_time, window_iters = 0.0, 0
    summary = {"best_val_loss": best, "best_val_ppl": math.exp(best), "train_seconds": round(train_time, 1),
               "run_wall_seconds": round(time.time() - wall0, 1),
               "run_cpu_seconds": round(time.process_time() - cpu0, 1),
               "params": model.n_params(), "history": history}
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("done: best val loss %.4f (ppl %.2f), %.0f s of training" % (best, math.exp(best), train_time))


if __name__ == "__main__":
    main()
