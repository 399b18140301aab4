"""Builds the training corpus: the King James Bible (bible-kjv) and the World English Bible
(sword-text-web, read with diatheke), cleaned, split by book.

Usage: python3 tools/train/corpus.py OUTDIR [--sources kjv,web]

Sources (Debian packages, both texts in the public domain; models/README.md quotes the copyright files):
  kjv  `bible -f 'Gen1:1-Rev22:21'` (bible-kjv + bible-kjv-text) prints one verse a line as
       "<Book><chapter>:<verse> <text>", e.g. "Ge1:1 In the beginning God ...". 66 books.
  web  `diatheke -b engWEB2015eb -f OSIS -k 'Gen 1:1-Rev 22:21'` (diatheke + sword-text-web): the
       World English Bible with the deuterocanon, 66 + 15 books, one verse a line as
       "[heading  ]<Book> <chapter>:<verse>: <OSIS text>". The text is modern English (you, Yahweh).

Cleaning (deterministic):
  - the verse reference is dropped (the models learn the text, not the numbering);
  - web: what diatheke prints before the reference (psalm titles, acrostic letters, and headings it
    carries over from earlier verses) is dropped; OSIS tags are removed; where the module lost the
    space at a removed footnote ("God</w><w>created", "Christ</w>,<w>the", "land ofTubias",
    "country,shunning") one is put back (the module has no word with a capital inside); curly
    quotes become ASCII ' and ", the em dash "--", so that the text is ASCII like the KJV's;
    empty verses are skipped;
  - runs of whitespace inside a verse become one space, leading/trailing spaces are removed;
  - a book is its verses, one per line ("\n" after each), with an empty line between chapters;
  - books are documents: in the training stream each book is followed by <|endoftext|>; in the
    plain-text files books are separated by one more empty line.
Validation split: whole books (VAL_BOOKS below, by canonical position, so the rule holds in every
translation), chosen across genres: narrative (Ruth, Jonah), wisdom (Ecclesiastes), poetry
(Lamentations), prophecy (Joel), gospel (Mark), epistles (Galatians, 1 Peter). The validation text
is the KJV's; the same books of every other source are excluded from all training text (and from
the tokenizer, which learns from the training split only).

Writes OUTDIR/books.json ([{name, source, canon, split, chapters, verses, text}], training and KJV
validation books only), OUTDIR/train.txt, OUTDIR/val.txt and OUTDIR/corpus.json (sizes per source,
the excluded books, and the n-gram overlap between val.txt and train.txt).
"""
import argparse
import json
import os
import re
import subprocess

BIBLE_RANGE = "Gen1:1-Rev22:21"
# The canonical 66 books (Protestant order), as the KJV's `bible` and the WEB's diatheke name them.
KJV_BOOKS = ["Ge", "Exo", "Lev", "Num", "Deu", "Josh", "Jdgs", "Ruth", "1Sm", "2Sm", "1Ki", "2Ki",
             "1Chr", "2Chr", "Ezra", "Neh", "Est", "Job", "Psa", "Prv", "Eccl", "SSol", "Isa", "Jer",
             "Lam", "Eze", "Dan", "Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nahum", "Hab", "Zep",
             "Hag", "Zec", "Mal", "Mat", "Mark", "Luke", "John", "Acts", "Rom", "1Cor", "2Cor", "Gal",
             "Eph", "Phi", "Col", "1Th", "2Th", "1Tim", "2Tim", "Titus", "Phmn", "Heb", "Jas", "1Pet",
             "2Pet", "1Jn", "2Jn", "3Jn", "Jude", "Rev"]
WEB_BOOKS = ["Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
             "I Samuel", "II Samuel", "I Kings", "II Kings", "I Chronicles", "II Chronicles", "Ezra",
             "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
             "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos",
             "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah",
             "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "I Corinthians",
             "II Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians",
             "I Thessalonians", "II Thessalonians", "I Timothy", "II Timothy", "Titus", "Philemon",
             "Hebrews", "James", "I Peter", "II Peter", "I John", "II John", "III John", "Jude",
             "Revelation of John"]
# The WEB's deuterocanon (NRSVA versification; none of it is a validation book).
WEB_DEUTERO = ["Tobit", "Judith", "Esther (Greek)", "Wisdom", "Sirach", "Baruch", "Prayer of Azariah",
               "Susanna", "Bel and the Dragon", "I Maccabees", "II Maccabees", "I Esdras",
               "Prayer of Manasses", "Additional Psalm", "III Maccabees", "II Esdras", "IV Maccabees"]
VAL_BOOKS = ["Ruth", "Eccl", "Lam", "Joel", "Jonah", "Mark", "Gal", "1Pet"]
VAL_CANON = sorted(KJV_BOOKS.index(b) for b in VAL_BOOKS)

WEB_MODULE = "engWEB2015eb"
WEB_RANGE = "Gen 1:1-Rev 22:21"
SOURCES = {
    "kjv": {"command": "bible -f '%s'" % BIBLE_RANGE, "packages": "bible-kjv, bible-kjv-text",
            "license": "public domain (bible-kjv-text copyright: \"The copyright for the King James "
                       "Version text of the Bible is expired\")"},
    "web": {"command": "diatheke -b %s -f OSIS -k '%s'" % (WEB_MODULE, WEB_RANGE),
            "packages": "diatheke, sword-text-web",
            "license": "public domain (sword-text-web copyright: \"The World English Bible is in the "
                       "Public Domain\"; cleaned here, so the result is not called the WEB itself)"},
}

# One KJV verse line: book abbreviation (may start with a digit: 1Sm, 2Ki), chapter, verse, text.
VERSE_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")
# One WEB line: anything diatheke prints first, then "<Book> <ch>:<v>: " (names longest first so
# that "I John" is not read as "John").
_WEB_NAMES = sorted(WEB_BOOKS + WEB_DEUTERO, key=len, reverse=True)
WEB_VERSE_RE = re.compile(r"(?:^|\s|>)(%s) (\d+):(\d+): (.*)$" % "|".join(re.escape(n) for n in _WEB_NAMES))
WEB_ASCII = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": "--"}


def corpus_run(cmd):
    """Returns a program's stdout as str (UTF-8); raises if it is missing or fails."""
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=dict(os.environ, LC_ALL="C.UTF-8"))
    return out.stdout.decode("utf-8")


def corpus_add_verse(books, name, chapter, text):
    """Appends a verse to books [(name, [chapter: [verse text]])], opening a book or chapter."""
    if not books or books[-1][0] != name:
        books.append((name, [], [None]))
    if chapter != books[-1][2][0]:
        books[-1][1].append([])
        books[-1][2][0] = chapter
    books[-1][1][-1].append(text)


def corpus_parse(raw):
    """KJV: returns books as a list of (name, [chapter: [verse text]]) in canonical order."""
    books = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        m = VERSE_RE.match(line)
        if not m:
            raise ValueError("bible output line %d: not '<Book><ch>:<v> <text>': %r" % (lineno, line))
        text = " ".join(m.group(4).split())
        if not text:
            raise ValueError("bible output line %d: empty verse" % lineno)
        corpus_add_verse(books, m.group(1), int(m.group(2)), text)
    return [(n, chs) for n, chs, _ in books]


def corpus_web_clean(osis):
    """One WEB verse's OSIS text as plain ASCII text (see the module docstring)."""
    s = re.sub(r"</w>(?=<w[ >])", "</w> ", osis)                # a lost space between two words
    s = re.sub(r"([,.;:!?])(?=<w[ >])", r"\1 ", s)              # ... or after punctuation
    s = re.sub(r"<[^>]*>", "", s)
    s = re.sub(r"([a-z])(?=[A-Z])", r"\1 ", s)                   # "ofTubias", "bornSon"
    s = re.sub(r"([,;:.!?])(?=[A-Za-z])", r"\1 ", s)            # "country,shunning"
    for k, v in WEB_ASCII.items():
        s = s.replace(k, v)
    return " ".join(s.split())


def corpus_parse_web(raw):
    """WEB: returns books as (name, [chapter: [verse text]]) in module order; skips empty verses."""
    books = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if line == "(%s)" % WEB_MODULE or not line.strip():
            continue
        m = WEB_VERSE_RE.search(line)
        if not m:
            raise ValueError("diatheke output line %d: no '<Book> <ch>:<v>: ': %r" % (lineno, line[:200]))
        text = corpus_web_clean(m.group(4))
        if not text:
            continue
        corpus_add_verse(books, m.group(1), int(m.group(2)), text)
    books = [(n, chs) for n, chs, _ in books]
    for name, chs in books:
        for ch in chs:
            for v in ch:
                bad = [c for c in v if ord(c) > 127]
                if bad:
                    raise ValueError("diatheke output: %s: non-ASCII %r left after cleaning in %r" % (name, bad[0], v))
    return books


def corpus_book_text(chapters):
    """A book as text: one verse a line, an empty line between chapters."""
    return "\n".join("".join(v + "\n" for v in ch) for ch in chapters)


def corpus_entries(source, books, canon_names):
    """[{name, source, canon, split, ...}]: canon is the position among the 66 (None: deuterocanon);
    validation books are 'val' for the KJV and 'excluded' for every other source."""
    names = [b[0] for b in books]
    if [n for n in names if n in canon_names] != canon_names:
        raise ValueError("%s: books %s, expected the 66 in order %s" % (source, names, canon_names))
    out = []
    for name, chs in books:
        canon = canon_names.index(name) if name in canon_names else None
        if canon in VAL_CANON:
            split = "val" if source == "kjv" else "excluded"
        else:
            split = "train"
        out.append({"name": name, "source": source, "canon": canon, "split": split,
                    "chapters": len(chs), "verses": sum(len(c) for c in chs), "text": corpus_book_text(chs)})
    return out


def corpus_build(sources):
    """Returns the book entries of all sources (KJV first)."""
    books = corpus_entries("kjv", corpus_parse(corpus_run(["bible", "-f", BIBLE_RANGE])), KJV_BOOKS)
    if "web" in sources:
        raw = corpus_run(["diatheke", "-b", WEB_MODULE, "-f", "OSIS", "-k", WEB_RANGE])
        web = corpus_parse_web(raw)
        extra = [n for n, _ in web if n not in WEB_BOOKS and n not in WEB_DEUTERO]
        if extra:
            raise ValueError("diatheke output: unknown books %s" % extra)
        books += corpus_entries("web", web, WEB_BOOKS)
    return books


def corpus_join(books):
    """The plain-text form of a split: books separated by an empty line."""
    return "\n".join(b["text"] for b in books)


def corpus_ngram_overlap(val_text, train_text, n=8):
    """Fraction of the word n-grams of val_text that occur anywhere in train_text (a leak check:
    the KJV's own parallels, e.g. Mark in Matthew and Luke, give a baseline)."""
    def grams(t):
        w = t.split()
        return {" ".join(w[i:i + n]) for i in range(len(w) - n + 1)}
    v = grams(val_text)
    return len(v & grams(train_text)) / max(1, len(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--sources", default="kjv,web", help="comma-separated: kjv (always), web")
    args = ap.parse_args()
    sources = [s for s in args.sources.split(",") if s]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or "kjv" not in sources:
        raise SystemExit("corpus.py: --sources %r: need kjv, and only %s" % (args.sources, ",".join(SOURCES)))
    os.makedirs(args.outdir, exist_ok=True)
    books = corpus_build(sources)
    excluded = [b for b in books if b["split"] == "excluded"]
    assert all(b["canon"] not in VAL_CANON for b in books if b["split"] == "train")
    summary = {"sources": {s: SOURCES[s] for s in sources}, "val_books": VAL_BOOKS,
               "excluded": ["%s:%s" % (b["source"], b["name"]) for b in excluded]}
    texts = {}
    for split in ("train", "val"):
        sel = [b for b in books if b["split"] == split]
        texts[split] = corpus_join(sel)
        with open(os.path.join(args.outdir, split + ".txt"), "w", encoding="utf-8", newline="\n") as f:
            f.write(texts[split])
        summary[split] = {"books": len(sel), "chapters": sum(b["chapters"] for b in sel),
                          "verses": sum(b["verses"] for b in sel), "bytes": len(texts[split].encode()),
                          "words": len(texts[split].split())}
        for s in sources:
            ss = [b for b in sel if b["source"] == s]
            if ss:
                t = corpus_join(ss)
                summary[split][s] = {"books": len(ss), "verses": sum(b["verses"] for b in ss),
                                     "bytes": len(t.encode()), "words": len(t.split())}
    kjv_train = corpus_join([b for b in books if b["split"] == "train" and b["source"] == "kjv"])
    summary["val_8gram_overlap"] = {"kjv_train": corpus_ngram_overlap(texts["val"], kjv_train),
                                    "train": corpus_ngram_overlap(texts["val"], texts["train"])}
    with open(os.path.join(args.outdir, "books.json"), "w") as f:
        json.dump([b for b in books if b["split"] != "excluded"], f)
    with open(os.path.join(args.outdir, "corpus.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for split in ("train", "val"):
        r = summary[split]
        print("corpus: %-5s %d books, %d verses, %d bytes, %d words (%s)" %
              (split, r["books"], r["verses"], r["bytes"], r["words"],
               ", ".join("%s %d bytes" % (s, r[s]["bytes"]) for s in sources if s in r)))
    print("corpus: excluded (validation books of other translations): %s" % (" ".join(summary["excluded"]) or "none"))
    print("corpus: val 8-word n-grams also in training text: %.4f (KJV training books alone: %.4f)" %
          (summary["val_8gram_overlap"]["train"], summary["val_8gram_overlap"]["kjv_train"]))


if __name__ == "__main__":
    main()
