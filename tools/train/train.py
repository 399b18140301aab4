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
block_size - 1 of them). The model with the best validation loss over the evaluations (with
--eval-data: the best acceptance at the sampling defaults) is the one written (as fp16 or fp32 safetensors); the log records every evaluation.

Training text: the books of split "train" of every source in books.json (corpus.py), each book's
tokens followed by <|endoftext|>. --mix kjv:0.6,web:0.4 draws that share of each batch's windows from
each source's stream (default: in proportion to their tokens). Validation is KJV only (val.txt).

--autocast bf16 runs the steps' matrix products in bfloat16 (torch.autocast on the CPU; weights,
optimizer state, loss and evaluations stay float32): about 3x faster per step at T=1024 on a CPU
with AVX512-BF16/AMX. Evaluations are always float32.

Distillation (--teacher DIR): the loss is alpha * T^2 * KL(p_teacher || q_student) at temperature
T (--distill-temp, Hinton et al.'s soft targets; DistillSpec's forward KL at T=1) plus (1 - alpha)
times the usual cross-entropy on the next token (--distill-alpha). The teacher (a model directory,
e.g. the trained target) runs in eval mode without gradients on the same windows as the student,
its LM head in float32; the log then also reports the expected speculative acceptance
sum_x min(p(x), q(x)) on the validation windows at temperature 1.

On-policy distillation from a cache (--data DIR --teacher-topk K, the draft's second phase in
train.mk): the rows of DIR (onpolicy.py: text the target sampled at its generation_config, and
windows of the training text) replace the random windows, and the teacher's top-K tokens and
log-probabilities after every prefix are computed once (DIR/teacher-topK.npz, keyed by the rows and
the teacher's weights) instead of a teacher pass per step, which was most of a distilled step. The
KL is then over the teacher's K tokens (renormalised); --distill-loss chain instead takes the
teacher's distribution after the sampler chain (T 0.8, top-k 50, top-p 0.95; K >= 50 covers it
exactly) and the student's at T 0.8: the distributions whose overlap sum_x min(p', q') is the
acceptance at the defaults. --eval-data DIR (the target's samples from validation prompts) adds
that acceptance to every evaluation, and the best one picks the model written.

--init-from CKPT starts from another run's last weights (WORK/ckpt.pt of a finished run) with a fresh
optimizer and its own schedule: train.mk uses it for the target's second phase, a short low-rate run
on the KJV alone (the validation books' translation), after the first phase on KJV + WEB.

Checkpoints: WORK/ckpt.pt is written atomically every --ckpt-interval iterations and after every
evaluation (model, optimizer, both random generators, history, compute so far). With --resume a run
continues from it, and the result is the one an uninterrupted run gives (same windows, same
updates); a checkpoint made with other model or data settings is refused. Compute (wall seconds,
CPU seconds of all threads, seconds in steps, tokens/s) is summed over all the pieces of a run.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # threads that spin starve a shared 2-core box

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import Tokenizer  # noqa: E402
from gpt2 import GPT2, GPT2Config, gpt2_flops_per_token, gpt2_load_dir, gpt2_save_dir  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

GENERATION = {"do_sample": True, "temperature": 0.8, "top_k": 50, "top_p": 0.95,
              "max_new_tokens": 200, "repetition_penalty": 1.0}


def train_load_streams(corpus_dir, tok, tok_dir):
    """Returns ({source: train ids with <|endoftext|> after each book}, val ids of val.txt) as int64
    arrays, and the key of the data. Encoding 8 MB in Python takes a minute, so the ids are kept in
    TOK_DIR/ids.npz, keyed by the SHA-256 of books.json, val.txt and merges.txt (a resumed or
    distilled run reads them)."""
    h = hashlib.sha256()
    for path in (os.path.join(corpus_dir, "books.json"), os.path.join(corpus_dir, "val.txt"),
                 os.path.join(tok_dir, "merges.txt")):
        with open(path, "rb") as f:
            h.update(f.read())
    cache = os.path.join(tok_dir, "ids.npz")
    if os.path.exists(cache):
        z = np.load(cache)
        if str(z["key"]) == h.hexdigest():
            return ({k[6:]: z[k].astype(np.int64) for k in z.files if k.startswith("train_")},
                    z["val"].astype(np.int64), h.hexdigest())
    train, val = train_encode_streams(corpus_dir, tok)
    tmp = cache + ".tmp.npz"
    np.savez(tmp, key=h.hexdigest(), val=val.astype(np.int32),
             **{"train_" + k: v.astype(np.int32) for k, v in train.items()})
    os.replace(tmp, cache)
    return train, val, h.hexdigest()


def train_encode_streams(corpus_dir, tok):
    """train_load_streams without the cache."""
    with open(os.path.join(corpus_dir, "books.json")) as f:
        books = json.load(f)
    train = {}
    for b in books:
        if b["split"] == "train":
            ids = train.setdefault(b.get("source", "kjv"), [])
            ids.extend(tok.encode(b["text"]))
            ids.append(tok.eot)
    with open(os.path.join(corpus_dir, "val.txt"), encoding="utf-8") as f:
        val = tok.encode(f.read())
    return {k: np.array(v, dtype=np.int64) for k, v in train.items()}, np.array(val, dtype=np.int64)


def train_mix(spec, streams):
    """Windows per batch from each source: {source: share}, shares summing to 1. spec is
    'kjv:0.6,web:0.4' or empty (in proportion to each source's tokens)."""
    if not spec:
        total = sum(len(v) for v in streams.values())
        return {k: len(v) / total for k, v in streams.items()}
    mix = {}
    for part in spec.split(","):
        name, _, w = part.partition(":")
        if name not in streams:
            raise SystemExit("train.py: --mix %r: no training text from source %r (have %s)" %
                             (spec, name, ", ".join(streams)))
        try:
            mix[name] = float(w)
        except ValueError:
            raise SystemExit("train.py: --mix %r: share %r of %s is not a number" % (spec, w, name))
    total = sum(mix.values())
    if total <= 0 or any(v < 0 for v in mix.values()):
        raise SystemExit("train.py: --mix %r: shares must be >= 0 with a positive sum" % spec)
    return {k: v / total for k, v in mix.items()}


def train_batch(rng, streams, mix, batch_size, T):
    """(x, y) int64 (B, T): each row a random window of T+1 tokens from a source drawn by mix.
    With one source this draws exactly what the single-stream loop of the committed models did."""
    names = sorted(n for n in mix if mix[n] > 0)
    if len(names) == 1:
        picks = [(names[0], batch_size)]
    else:
        src = rng.choice(len(names), size=batch_size, p=[mix[n] for n in names])
        picks = [(n, int((src == i).sum())) for i, n in enumerate(names)]
    rows = []
    for name, count in picks:
        ids = streams[name]
        rows += [ids[s:s + T + 1] for s in rng.integers(0, len(ids) - T - 1, count)]
    chunk = np.stack(rows)
    return torch.from_numpy(chunk[:, :-1]), torch.from_numpy(chunk[:, 1:])


def distill_loss(logits, t_logits, y, alpha, temp):
    """alpha * temp^2 * KL(teacher || student) at temp + (1 - alpha) * cross-entropy(y); all
    float32. Returns (loss, kl, ce) with kl and ce as floats for the log."""
    V = logits.size(-1)
    logits = logits.float().reshape(-1, V)
    ce = F.cross_entropy(logits, y.reshape(-1))
    logq = F.log_softmax(logits / temp, -1)
    logp = F.log_softmax(t_logits.float().reshape(-1, V) / temp, -1)
    kl = (logp.exp() * (logp - logq)).sum(-1).mean()
    return alpha * temp * temp * kl + (1.0 - alpha) * ce, kl.item(), ce.item()


def chain_probs(z, gen=GENERATION):
    """The sampler chain of gen (temperature, then top-k, then top-p, Hugging Face semantics) on
    logits or log-probabilities z (N, K) sorted in descending order along the last axis (K >= top_k).
    Returns (N, top_k) probabilities of the first top_k entries (zeros where top-p cut), summing to 1."""
    z = z[:, :gen["top_k"]].float() / gen["temperature"]
    p = F.softmax(z, -1)
    before = p.cumsum(-1) - p        # mass of the more likely tokens; a token stays while it is < top_p
    p = torch.where(before < gen["top_p"], p, torch.zeros_like(p))
    return p / p.sum(-1, keepdim=True)


def cached_distill_loss(logits, t_ids, t_logp, y, valid, alpha, temp, kind):
    """distill_loss on a teacher cache: the teacher's top-K token ids t_ids (B, T, K) and their
    log-probabilities t_logp at temperature 1 (sorted, descending). kind "kl": KL(p || q) at temp
    with p the teacher's distribution renormalised over its K tokens; kind "chain": the cross-entropy
    of the student at the sampling temperature against the teacher's distribution after the whole
    sampler chain (GENERATION: T 0.8, top-k 50, top-p 0.95), the distribution speculative sampling
    accepts by (KL plus the chain distribution's fixed entropy). Plus (1 - alpha) x cross-entropy(y).
    valid (B, T) bool masks padding. Returns (loss, kl, ce)."""
    V = logits.size(-1)
    logits = logits.float().reshape(-1, V)
    m = valid.reshape(-1)
    logits, y = logits[m], y.reshape(-1)[m]
    ids = t_ids.reshape(-1, t_ids.size(-1))[m].long()
    lp = t_logp.reshape(-1, t_logp.size(-1))[m].float()
    ce = F.cross_entropy(logits, y)
    if kind == "chain":
        p = chain_probs(lp)
        logq = F.log_softmax(logits / GENERATION["temperature"], -1).gather(1, ids[:, :p.size(1)])
        kl = -(p * logq).sum(-1).mean()
        scale = 1.0
    else:
        logp = F.log_softmax(lp / temp, -1)
        logq = F.log_softmax(logits / temp, -1).gather(1, ids)
        kl = (logp.exp() * (logp - logq)).sum(-1).mean()
        scale = temp * temp
    return alpha * scale * kl + (1.0 - alpha) * ce, kl.item(), ce.item()


@torch.no_grad()
def teacher_cache_build(teacher, rows, k, autocast, batch=4, log=print):
    """(ids int16, logp float16), each (rows, n-1, k): the teacher's k most likely next tokens after
    every prefix of each row (n tokens) and their log-probabilities at temperature 1, most likely
    first. One teacher pass over the rows, its LM head in float32."""
    R, N = rows.shape
    ids = np.zeros((R, N - 1, k), dtype=np.int16)
    logp = np.zeros((R, N - 1, k), dtype=np.float16)
    teacher.eval()
    t0 = time.time()
    for i in range(0, R, batch):
        x = torch.from_numpy(rows[i:i + batch, :-1].astype(np.int64))
        with autocast():
            z = teacher(x, head_fp32=True)
        v, j = F.log_softmax(z.float(), -1).topk(k, -1)
        ids[i:i + batch] = j.numpy().astype(np.int16)
        logp[i:i + batch] = v.numpy().astype(np.float16)
        if (i // batch) % 64 == 0:
            log("teacher cache: %d/%d rows, %.0f tokens/s" % (i + len(x), R, (i + len(x)) * (N - 1) /
                                                              max(1e-9, time.time() - t0)))
            sys.stdout.flush()
    return ids, logp


def teacher_cache_load(data_dir, teacher, teacher_sha, k, autocast):
    """rows, lens of DATA_DIR (onpolicy.py) and the teacher's top-k over them, cached in
    DATA_DIR/teacher-top<k>.npz keyed by the SHA-256 of the rows and of the teacher's weights.
    Returns (rows, lens, ids, logp, key)."""
    rows = np.load(os.path.join(data_dir, "rows.npy"))
    lens = np.load(os.path.join(data_dir, "lens.npy"))
    key = hashlib.sha256(rows.tobytes() + lens.tobytes() + teacher_sha.encode()).hexdigest()
    path = os.path.join(data_dir, "teacher-top%d.npz" % k)
    if os.path.exists(path):
        z = np.load(path)
        if str(z["key"]) == key:
            return rows, lens, z["ids"], z["logp"], key
    t0 = time.time()
    ids, logp = teacher_cache_build(teacher, rows, k, autocast)
    print("teacher cache: %s, %d rows x %d positions x top-%d in %.0f s" %
          (path, rows.shape[0], rows.shape[1] - 1, k, time.time() - t0))
    tmp = path + ".tmp.npz"
    np.savez(tmp, key=key, ids=ids, logp=logp)
    os.replace(tmp, path)
    return rows, lens, ids, logp, key


@torch.no_grad()
def chain_acceptance(student, rows, lens, t_ids, t_logp, batch=4):
    """Mean over the positions of rows of sum_x min(p'(x), q'(x)), p' and q' the teacher's and the
    student's distributions after the sampler chain (GENERATION): the probability that speculative
    sampling at the defaults accepts the student's token there. With rows the target's own samples
    (onpolicy.py) this is the acceptance a user sees, up to the draft's q8 rounding in tokentop."""
    student.eval()
    tot, n = 0.0, 0
    K = GENERATION["top_k"]
    for i in range(0, len(rows), batch):
        x = torch.from_numpy(rows[i:i + batch, :-1].astype(np.int64))
        logits = student(x).float()
        B, T, V = logits.shape
        valid = torch.from_numpy(np.arange(T)[None, :] < (lens[i:i + batch, None] - 1)).reshape(-1)
        logits = logits.reshape(-1, V)[valid]
        qz, qi = logits.topk(K, -1)
        q = torch.zeros_like(logits).scatter_(1, qi, chain_probs(qz))
        ti = torch.from_numpy(t_ids[i:i + batch].astype(np.int64)).reshape(B * T, -1)[valid]
        tp = chain_probs(torch.from_numpy(t_logp[i:i + batch].astype(np.float32)).reshape(B * T, -1)[valid])
        p = torch.zeros_like(logits).scatter_(1, ti[:, :K], tp)
        a = torch.minimum(p, q).sum(-1)
        tot += a.sum().item()
        n += a.numel()
    return tot / n


@torch.no_grad()
def expected_acceptance(student, teacher, ids, T, max_windows=8):
    """Mean over positions of sum_x min(p(x), q(x)) at temperature 1 on the first windows of ids:
    the probability that speculative sampling accepts the student's token there."""
    student.eval()
    tot, n = 0.0, 0
    for s, e in score_windows(len(ids), T)[:max_windows]:
        x = torch.from_numpy(ids[s:e - 1][None])
        p = F.softmax(teacher(x), -1)
        q = F.softmax(student(x), -1)
        a = torch.minimum(p, q).sum(-1)
        tot += a.sum().item()
        n += a.numel()
    return tot / n


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


# Settings a checkpoint must share with the run that resumes it (the rest may change, e.g. the
# evaluation interval or the number of threads).
CKPT_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "dropout", "lr", "min_lr",
             "weight_decay", "warmup_iters", "max_iters", "seed", "mix", "autocast", "teacher",
             "distill_alpha", "distill_temp", "init_from", "teacher_topk", "distill_loss")
# Keys added after some checkpoints were written: a checkpoint without one had its default.
CKPT_DEFAULTS = {"teacher_topk": 0, "distill_loss": "kl"}


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
    ap.add_argument("--ckpt-interval", type=int, default=50, help="iterations between checkpoints")
    ap.add_argument("--log-interval", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["F16", "F32"], default="F16")
    ap.add_argument("--mix", default="", help="shares of each source's windows, e.g. kjv:0.6,web:0.4")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="matrix products of the training steps in bfloat16")
    ap.add_argument("--init-from", default=None, metavar="CKPT",
                    help="start from the weights of another run's checkpoint (WORK/ckpt.pt), fresh optimizer")
    ap.add_argument("--teacher", default=None, help="model directory to distill from")
    ap.add_argument("--distill-alpha", type=float, default=1.0, help="weight of the KL term (1 - it: CE)")
    ap.add_argument("--distill-temp", type=float, default=1.0)
    ap.add_argument("--distill-loss", choices=["kl", "chain"], default="kl",
                    help="kl: KL at --distill-temp; chain: against the teacher after the sampler chain "
                         "(T 0.8, top-k 50, top-p 0.95) with the student at T 0.8 (needs --teacher-topk)")
    ap.add_argument("--data", default=None, metavar="DIR",
                    help="train on the rows of DIR (onpolicy.py) instead of windows of the training text")
    ap.add_argument("--teacher-topk", type=int, default=0, metavar="K",
                    help="with --data: the teacher's top-K over the rows, computed once and cached in "
                         "DIR/teacher-topK.npz, instead of a teacher pass per step")
    ap.add_argument("--eval-data", default=None, metavar="DIR",
                    help="rows (onpolicy.py, the target's samples) on which evaluations report the "
                         "acceptance at the sampling defaults (cached like --data)")
    ap.add_argument("--val-chunk", type=int, default=0, metavar="N",
                    help="also evaluate with windows of N+1 tokens (tokentop score --chunk N) and log bits/byte")
    ap.add_argument("--resume", action="store_true", help="continue from WORK/ckpt.pt if it exists")
    ap.add_argument("--bench", type=int, default=0, metavar="N",
                    help="time N training steps (after 1 warm-up step), print tokens/s and exit")
    args = ap.parse_args()
    if (args.data or args.eval_data or args.distill_loss == "chain") and not (args.teacher and args.teacher_topk):
        raise SystemExit("train.py: --data, --eval-data and --distill-loss chain need --teacher and --teacher-topk")
    if args.teacher_topk and not (GENERATION["top_k"] <= args.teacher_topk <= 4096):
        raise SystemExit("train.py: --teacher-topk %d: must be at least the sampler's top-k (%d)" %
                         (args.teacher_topk, GENERATION["top_k"]))
    work = args.work or args.out.rstrip("/") + ".work"
    os.makedirs(work, exist_ok=True)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    tok = Tokenizer(args.tokenizer)
    streams, val_ids, data_key = train_load_streams(args.corpus, tok, args.tokenizer)
    mix = train_mix(args.mix, streams)
    n_train = sum(len(v) for v in streams.values())
    with open(os.path.join(args.corpus, "val.txt"), "rb") as f:
        val_bytes = len(f.read())
    V = len(tok.vocab)
    T = args.block_size
    cfg = GPT2Config(V, T, args.n_embd, args.n_layer, args.n_head, dropout=args.dropout, eot_id=tok.eot)
    model = GPT2(cfg)
    # The mask is a buffer: attention dropout is left out (it costs a Bernoulli draw per score).
    for blk in model.h:
        blk.attn_drop.p = 0.0
    teacher = None
    if args.teacher:
        teacher = gpt2_load_dir(args.teacher)
        for p in teacher.parameters():
            p.requires_grad_(False)
        if teacher.cfg.vocab_size != V or teacher.cfg.n_positions < T:
            raise SystemExit("train.py: --teacher %s: vocab %d, n_positions %d; the student needs vocab %d, "
                             "n_positions >= %d" % (args.teacher, teacher.cfg.vocab_size,
                                                    teacher.cfg.n_positions, V, T))

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")

    teacher_sha = None
    if args.teacher:
        with open(os.path.join(args.teacher, "model.safetensors"), "rb") as f:
            teacher_sha = hashlib.sha256(f.read()).hexdigest()
    cache = None
    if args.data:
        # rows (R, n) of the target's samples (and of the text), the teacher's top-K after each prefix
        cache = teacher_cache_load(args.data, teacher, teacher_sha, args.teacher_topk, autocast)
        if cache[0].shape[1] - 1 > T:
            raise SystemExit("train.py: --data %s: rows of %d tokens, longer than --block-size %d + 1" %
                             (args.data, cache[0].shape[1], T))
        data_key = hashlib.sha256((data_key + cache[4]).encode()).hexdigest()
    eval_cache = None
    if args.eval_data:
        # float32 here: the evaluation's reference distributions (a small set)
        eval_cache = teacher_cache_load(args.eval_data, teacher, teacher_sha, args.teacher_topk,
                                        lambda: torch.autocast("cpu", enabled=False))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    print("config: %s" % json.dumps(vars(args), sort_keys=True))
    print("data: train %d tokens (%s), val %d tokens, vocab %d, eot %d; windows drawn %s" %
          (n_train, ", ".join("%s %d" % (k, len(v)) for k, v in streams.items()), len(val_ids), V, tok.eot,
           ", ".join("%s %.3f" % (k, mix[k]) for k in sorted(mix))))
    print("model: %d layers, %d heads, C %d, T %d: %d parameters (%d without wte/wpe); "
          "%.2fM multiply-adds per token at T=%d" %
          (cfg.n_layer, cfg.n_head, cfg.n_embd, T, model.n_params(),
           model.n_params() - model.wte.weight.numel() - model.wpe.weight.numel(),
           gpt2_flops_per_token(cfg, T) / 1e6, T))
    if teacher:
        print("teacher: %s (%d layers, C %d, %d parameters); loss %.2f x %s + %.2f x CE%s" %
              (args.teacher, teacher.cfg.n_layer, teacher.cfg.n_embd, teacher.n_params(), args.distill_alpha,
               "KL at temperature %.2f" % args.distill_temp if args.distill_loss == "kl" else
               "cross-entropy against the sampler chain's distribution (student at T %.2f)" % GENERATION["temperature"],
               1 - args.distill_alpha,
               "; teacher top-%d cached over %d rows of %s" % (args.teacher_topk, len(cache[0]), args.data)
               if cache else ""))
    sys.stdout.flush()

    tokens_per_iter = args.batch_size * (T if cache is None else cache[0].shape[1] - 1)

    def step(it):
        """One training step; returns (loss, kl or None)."""
        lr = lr_at(it, args)
        for g in opt.param_groups:
            g["lr"] = lr
        kl = None
        if cache is not None:
            rows, lens, t_ids, t_logp, _ = cache
            r = np.sort(rng.integers(0, len(rows), args.batch_size))
            chunk = torch.from_numpy(rows[r].astype(np.int64))
            x, y = chunk[:, :-1], chunk[:, 1:]
            valid = torch.from_numpy(np.arange(x.size(1))[None, :] < (lens[r, None] - 1))
            with autocast():
                logits = model(x)
            loss, kl, _ = cached_distill_loss(logits, torch.from_numpy(t_ids[r]), torch.from_numpy(t_logp[r]),
                                              y, valid, args.distill_alpha, args.distill_temp, args.distill_loss)
        else:
            x, y = train_batch(rng, streams, mix, args.batch_size, T)
            if teacher is not None:
                with torch.no_grad(), autocast():
                    t_logits = teacher(x, head_fp32=True)
            with autocast():
                logits = model(x)
            if teacher is not None:
                loss, kl, _ = distill_loss(logits, t_logits, y, args.distill_alpha, args.distill_temp)
            else:
                loss = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item(), kl

    if args.bench:
        model.train()
        step(0)
        t0, c0 = time.time(), time.process_time()
        for i in range(args.bench):
            step(1 + i)
        dt, dc = time.time() - t0, time.process_time() - c0
        print("bench: %d steps of %d tokens: %.0f ms/step, %.0f tokens/s (cpu %.0f%% of one core, load %.1f)" %
              (args.bench, tokens_per_iter, dt / args.bench * 1e3, args.bench * tokens_per_iter / dt,
               100 * dc / dt, os.getloadavg()[0]))
        # The untrained model, so that a draft's bench can use it as a teacher of the right shape.
        gpt2_save_dir(model, args.out, args.tokenizer, GENERATION, args.dtype)
        return

    run_cfg = {k: getattr(args, k) for k in CKPT_KEYS}
    # The data and the teacher's weights too: a checkpoint of another corpus or another target is
    # refused rather than silently continued.
    run_cfg["data_sha256"] = data_key
    if args.teacher:
        run_cfg["teacher_sha256"] = teacher_sha
    if args.init_from:
        # A second phase (e.g. a low learning rate on one source, train.mk's anneal): the weights of
        # a finished run's last checkpoint, float32, with a fresh optimizer and schedule. Its hash
        # joins the settings a resumed checkpoint must share.
        init = torch.load(args.init_from)
        if "model" not in init or init.get("config", {}).get("n_embd") != args.n_embd \
                or init["config"].get("n_layer") != args.n_layer or init["config"].get("block_size") != T:
            raise SystemExit("train.py: --init-from %s: not a checkpoint of a %d x %d model at T %d" %
                             (args.init_from, args.n_layer, args.n_embd, T))
        model.load_state_dict(init["model"])
        with open(args.init_from, "rb") as f:
            run_cfg["init_sha256"] = hashlib.sha256(f.read()).hexdigest()
        print("init: weights of %s (iteration %d of its run)" % (args.init_from, init["iter"]))
        del init
    it0, best, history, evaluated = 0, float("inf"), [], False
    spent = {"train_seconds": 0.0, "wall_seconds": 0.0, "cpu_seconds": 0.0, "pieces": 0}
    ckpt_path = os.path.join(work, "ckpt.pt")
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        ck_cfg = dict(CKPT_DEFAULTS, **ck.get("config", {}))
        diff = [k for k in run_cfg if ck_cfg.get(k) != run_cfg[k]]
        if diff:
            raise SystemExit("train.py: %s was made with other settings (%s: %s, now %s); remove %s to start "
                             "again" % (ckpt_path, diff[0], ck_cfg.get(diff[0]),
                                        run_cfg[diff[0]], work))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        torch.set_rng_state(ck["torch_rng"])
        rng.bit_generator.state = ck["np_rng"]
        it0, best, history, evaluated, spent = ck["iter"], ck["best"], ck["history"], ck["evaluated"], ck["spent"]
        print("resume: iteration %d, best val %.4f, %.0f s in steps so far (%d earlier pieces)" %
              (it0, best, spent["train_seconds"], spent["pieces"]))
    spent["pieces"] += 1

    cpu0 = time.process_time()     # CPU seconds of this process, all threads (evaluations included)
    wall0 = time.time()
    base = dict(spent)

    def save_ckpt(it, evaluated):
        spent["wall_seconds"] = base["wall_seconds"] + time.time() - wall0
        spent["cpu_seconds"] = base["cpu_seconds"] + time.process_time() - cpu0
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "iter": it, "evaluated": evaluated,
                    "best": best, "history": history, "spent": spent, "config": run_cfg,
                    "torch_rng": torch.get_rng_state(), "np_rng": rng.bit_generator.state}, tmp)
        os.replace(tmp, ckpt_path)

    window_time, window_iters = 0.0, 0
    for it in range(it0, args.max_iters + 1):
        did_eval = False
        if (it % args.eval_interval == 0 or it == args.max_iters) and not (it == it0 and evaluated):
            val_loss, n_val = score_stream(model, val_ids, T)
            # The same KJV training windows every time: 64 of 256 tokens, or as many tokens at larger T.
            erng = np.random.default_rng(0)
            tr = streams[sorted(streams)[0]] if "kjv" not in streams else streams["kjv"]
            starts = erng.integers(0, len(tr) - T - 1, max(1, 64 * 256 // T))
            tr_ids = np.concatenate([tr[s:s + T + 1] for s in starts])
            train_loss, _ = score_stream(model, tr_ids, T)
            rec = {"iter": it, "tokens": it * tokens_per_iter, "epochs": it * tokens_per_iter / n_train,
                   "train_loss": train_loss, "val_loss": val_loss, "val_ppl": math.exp(val_loss),
                   "val_tokens": n_val, "train_seconds": round(spent["train_seconds"], 1)}
            extra = ""
            rec["val_bits_per_byte"] = val_loss * n_val / math.log(2) / val_bytes
            if args.val_chunk:
                v, n = score_stream(model, val_ids, args.val_chunk)
                rec["val_loss_chunk%d" % args.val_chunk] = v
                rec["val_bits_per_byte_chunk%d" % args.val_chunk] = v * n / math.log(2) / val_bytes
                extra += "  bpb %.4f (chunk %d: val %.4f, bpb %.4f)" % (
                    rec["val_bits_per_byte"], args.val_chunk, v, rec["val_bits_per_byte_chunk%d" % args.val_chunk])
            else:
                extra += "  bpb %.4f" % rec["val_bits_per_byte"]
            if teacher is not None:
                rec["val_acceptance_T1"] = expected_acceptance(model, teacher, val_ids, T)
                extra += "  accept(T=1) %.4f" % rec["val_acceptance_T1"]
            if eval_cache is not None:
                rec["acceptance_defaults"] = chain_acceptance(model, *eval_cache[:4])
                extra += "  accept(defaults, target's samples) %.4f" % rec["acceptance_defaults"]
            model.train()
            history.append(rec)
            mark = ""
            # The model kept: the best validation loss, or with --eval-data the best acceptance at
            # the sampling defaults (what a draft is for), kept as its negative.
            crit = -rec["acceptance_defaults"] if eval_cache is not None else val_loss
            if crit < best:
                best = crit
                gpt2_save_dir(model, args.out, args.tokenizer, GENERATION, args.dtype)
                mark = " (saved)"
            print("eval %5d: train %.4f  val %.4f  ppl %.2f  epochs %.2f  %.0f s%s%s" %
                  (it, train_loss, val_loss, math.exp(val_loss), rec["epochs"], spent["train_seconds"], extra, mark))
            with open(os.path.join(work, "history.json"), "w") as f:
                json.dump(history, f, indent=1)
            did_eval = True
        if did_eval or (it % args.ckpt_interval == 0 and it != it0):
            save_ckpt(it, did_eval)
            sys.stdout.flush()
        if it == args.max_iters:
            break
        t0 = time.time()
        loss, kl = step(it)
        dt = time.time() - t0
        spent["train_seconds"] += dt
        window_time += dt
        window_iters += 1
        if it % args.log_interval == 0:
            print("iter %5d: loss %.4f%s  lr %.2e  %.0f ms/iter  %.0f tok/s  %.0f s  (cpu %.0f s, load %.1f)" %
                  (it, loss, "" if kl is None else "  kl %.4f" % kl, lr_at(it, args),
                   window_time / window_iters * 1000, window_iters * tokens_per_iter / window_time,
                   spent["train_seconds"], base["cpu_seconds"] + time.process_time() - cpu0, os.getloadavg()[0]))
            sys.stdout.flush()
            window_time, window_iters = 0.0, 0
    spent["wall_seconds"] = base["wall_seconds"] + time.time() - wall0
    spent["cpu_seconds"] = base["cpu_seconds"] + time.process_time() - cpu0
    if eval_cache is not None:
        best_rec = max(history, key=lambda r: r["acceptance_defaults"])
        best = best_rec["val_loss"]
        print("best: acceptance at the defaults %.4f at iteration %d (the model written)" %
              (best_rec["acceptance_defaults"], best_rec["iter"]))
    summary = {"best_val_loss": best, "best_val_ppl": math.exp(best),
               "train_seconds": round(spent["train_seconds"], 1),
               "run_wall_seconds": round(spent["wall_seconds"], 1),
               "run_cpu_seconds": round(spent["cpu_seconds"], 1), "run_pieces": spent["pieces"],
               "tokens": args.max_iters * tokens_per_iter,
               "tokens_per_second_in_steps": round(args.max_iters * tokens_per_iter / max(1e-9, spent["train_seconds"]), 1),
               "params": model.n_params(), "history": history}
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("done: best val loss %.4f (ppl %.2f); %.0f s in steps (%.0f tokens/s), run %.0f s wall, %.0f s cpu, "
          "%d piece(s)" % (best, math.exp(best), spent["train_seconds"], summary["tokens_per_second_in_steps"],
                           spent["wall_seconds"], spent["cpu_seconds"], spent["pieces"]))


if __name__ == "__main__":
    main()
