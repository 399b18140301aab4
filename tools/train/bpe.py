"""GPT-2 byte-level BPE: training a vocabulary, encoding, decoding, GPT-2-format files.

Usage: python3 tools/train/bpe.py train CORPUS_DIR OUTDIR VOCAB_SIZE
       python3 tools/train/bpe.py encode MODEL_DIR < text     (prints a JSON array of ids)

The scheme is GPT-2's exactly (openai/gpt-2 encoder.py): text is split by the pre-tokenizer regex
below, each piece becomes bytes, bytes become printable unicode characters through bytes_to_unicode,
and merges are applied lowest rank first. Training counts pieces over the training split (one count
per occurrence), then repeatedly merges the most frequent adjacent pair, counting each word
occurrence; ties go to the pair whose (left, right) strings sort first, so the result does not
depend on dict order. vocab.json holds the 256 byte symbols (ids 0..255 in bytes_to_unicode order,
as GPT-2's does), then one token per merge in merge order, then <|endoftext|> as the last id.
"""
import heapq
import json
import os
import sys
from collections import Counter, defaultdict

import regex

# GPT-2's pre-tokenizer, verbatim.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def bpe_bytes_to_unicode():
    """GPT-2's byte -> printable character map (printable Latin-1 bytes map to themselves)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs])), bs


def bpe_pieces(text):
    """The pre-tokenizer's pieces, each mapped to byte-unicode characters."""
    b2u, _ = bpe_bytes_to_unicode()
    pat = regex.compile(GPT2_PATTERN)
    return ["".join(b2u[b] for b in p.encode("utf-8")) for p in pat.findall(text)]


def bpe_train(texts, vocab_size, log=print):
    """Returns (vocab {token: id}, merges [(left, right)]) for vocab_size ids including <|endoftext|>."""
    _, byte_order = bpe_bytes_to_unicode()
    b2u, _ = bpe_bytes_to_unicode()
    n_merges = vocab_size - 256 - 1
    if n_merges < 0:
        raise ValueError("vocab_size %d < 257" % vocab_size)
    counts = Counter()
    for t in texts:
        counts.update(bpe_pieces(t))
    words = [list(w) for w in counts]          # each word as a list of symbols
    freqs = [counts[w] for w in counts]
    pair_count = defaultdict(int)
    pair_where = defaultdict(set)               # pair -> indices of words containing it
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freqs[i]
            pair_where[(a, b)].add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges:
        # Lazy deletion: an entry is current only if its count matches the live count.
        while heap:
            negc, pair = heapq.heappop(heap)
            if pair_count.get(pair, 0) == -negc and negc < 0:
                break
        else:
            log("bpe: no pairs left after %d merges" % len(merges))
            break
        if -negc < 2:
            log("bpe: most frequent pair occurs once; stopping at %d merges" % len(merges))
            break
        a, b = pair
        merged = a + b
        merges.append(pair)
        changed = defaultdict(int)
        for i in list(pair_where[pair]):
            w, f = words[i], freqs[i]
            for x, y in zip(w, w[1:]):
                changed[(x, y)] -= f
            out = []
            j = 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                changed[(x, y)] += f
                pair_where[(x, y)].add(i)
        for p, d in changed.items():
            if d == 0:
                continue
            pair_count[p] += d
            if pair_count[p] <= 0:
                del pair_count[p]
            else:
                heapq.heappush(heap, (-pair_count[p], p))
        pair_count.pop(pair, None)
        del pair_where[pair]
        if len(merges) % 500 == 0:
            log("bpe: %d merges, last %r + %r (count %d)" % (len(merges), a, b, -negc))
    vocab = {}
    for byte in byte_order:
        vocab[b2u[byte]] = len(vocab)
    for a, b in merges:
        tok = a + b
        if tok in vocab:
            raise ValueError("merge %r + %r makes an existing token" % (a, b))
        vocab[tok] = len(vocab)
    vocab[EOT] = len(vocab)
    return vocab, merges


def bpe_save(outdir, vocab, merges):
    """Writes GPT-2-format vocab.json and merges.txt."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(outdir, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))


class Tokenizer:
    """Encoder/decoder over GPT-2-format files; <|endoftext|> in text is ordinary text."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        with open(os.path.join(model_dir, "merges.txt"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[0].startswith("#version"):
            lines = lines[1:]
        merges = [tuple(l.split(" ")) for l in lines if l]
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.inv = {i: t for t, i in self.vocab.items()}
        self.b2u, _ = bpe_bytes_to_unicode()
        self.u2b = {u: b for b, u in self.b2u.items()}
        self.pat = regex.compile(GPT2_PATTERN)
        self.eot = self.vocab[EOT]
        self.cache = {}

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            best = min(((self.ranks.get(p, 1 << 60), k) for k, p in enumerate(zip(parts, parts[1:]))))
            if best[0] == 1 << 60:
                break
            a, b = parts[best[1]], parts[best[1] + 1]
            out = []
            j = 0
            while j < len(parts):
                if j + 1 < len(parts) and parts[j] == a and parts[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(parts[j])
                    j += 1
            parts = out
        self.cache[word] = parts
        return parts

    def encode(self, text):
        ids = []
        for piece in self.pat.findall(text):
            word = "".join(self.b2u[b] for b in piece.encode("utf-8"))
            ids.extend(self.vocab[t] for t in self._bpe(word))
        return ids

    def decode_bytes(self, ids):
        return bytes(self.u2b[c] for i in ids for c in self.inv[i])

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "train":
        corpus_dir, outdir, vocab_size = sys.argv[2], sys.argv[3], int(sys.argv[4])
        with open(os.path.join(corpus_dir, "books.json")) as f:
            books = json.load(f)
        texts = [b["text"] for b in books if b["split"] == "train"]
        vocab, merges = bpe_train(texts, vocab_size)
        bpe_save(outdir, vocab, merges)
        tok = Tokenizer(outdir)
        for split in ("train", "val"):
            with open(os.path.join(corpus_dir, split + ".txt"), encoding="utf-8") as f:
                text = f.read()
            ids = tok.encode(text)
            if tok.decode(ids) != text:
                raise SystemExit("bpe: %s.txt does not round-trip" % split)
            print("bpe: %s.txt: %d bytes -> %d tokens (%.3f bytes/token), round-trips" %
                  (split, len(text.encode()), len(ids), len(text.encode()) / len(ids)))
        print("bpe: vocab %d (%d merges + 256 bytes + <|endoftext|> = id %d) -> %s" %
              (len(vocab), len(merges), vocab[EOT], outdir))
    elif len(sys.argv) == 3 and sys.argv[1] == "encode":
        tok = Tokenizer(sys.argv[2])
        print(json.dumps(tok.encode(sys.stdin.read())))
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main()
