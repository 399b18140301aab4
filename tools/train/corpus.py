"""Builds the training corpus: the King James Bible from Debian's bible-kjv, cleaned, split by book.

Usage: python3 tools/train/corpus.py OUTDIR

Source: `bible -f 'Gen1:1-Rev22:21'` (Debian packages bible-kjv + bible-kjv-text, public domain text)
prints one verse a line as "<Book><chapter>:<verse> <text>", e.g. "Ge1:1 In the beginning God ...".

Cleaning (deterministic, no other changes to the text):
  - the verse reference is dropped (the models learn the text, not the numbering);
  - runs of whitespace inside a verse become one space (the source has a few double spaces),
    leading/trailing spaces are removed;
  - a book is its verses, one per line ("\n" after each), with an empty line between chapters;
  - books are documents: in the training stream each book is followed by <|endoftext|>; in the
    plain-text files books are separated by one more empty line.
Validation split: whole books (VAL_BOOKS below), chosen across genres: narrative (Ruth, Jonah), wisdom
(Ecclesiastes), poetry (Lamentations), prophecy (Joel), gospel (Mark), epistles (Galatians, 1 Peter).

Writes OUTDIR/books.json ([{name, split, chapters, verses, text}]), OUTDIR/train.txt, OUTDIR/val.txt
and OUTDIR/corpus.json (sizes).
"""
import json
import os
import re
import subprocess
import sys

BIBLE_RANGE = "Gen1:1-Rev22:21"
VAL_BOOKS = ["Ruth", "Eccl", "Lam", "Joel", "Jonah", "Mark", "Gal", "1Pet"]

# One verse line: book abbreviation (may start with a digit: 1Sm, 2Ki), chapter, verse, text.
VERSE_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def corpus_read_bible():
    """Returns the raw `bible` output as str; raises if the program is missing or fails."""
    out = subprocess.run(["bible", "-f", BIBLE_RANGE], check=True, stdout=subprocess.PIPE,
                         env=dict(os.environ, LC_ALL="C"))
    return out.stdout.decode("ascii")


def corpus_parse(raw):
    """Returns books as a list of (name, [chapter: [verse text]]) in canonical order."""
    books = []
    last_chapter = None
    for lineno, line in enumerate(raw.splitlines(), 1):
        m = VERSE_RE.match(line)
        if not m:
            raise ValueError("bible output line %d: not '<Book><ch>:<v> <text>': %r" % (lineno, line))
        name, chapter, text = m.group(1), int(m.group(2)), m.group(4)
        text = " ".join(text.split())
        if not text:
            raise ValueError("bible output line %d: empty verse" % lineno)
        if not books or books[-1][0] != name:
            books.append((name, []))
            last_chapter = None
        if chapter != last_chapter:
            books[-1][1].append([])
            last_chapter = chapter
        books[-1][1][-1].append(text)
    return books


def corpus_book_text(chapters):
    """A book as text: one verse a line, an empty line between chapters."""
    return "\n".join("".join(v + "\n" for v in ch) for ch in chapters)


def corpus_build():
    """Returns [{name, split, chapters, verses, text}] for all 66 books."""
    books = corpus_parse(corpus_read_bible())
    names = [b[0] for b in books]
    for v in VAL_BOOKS:
        if v not in names:
            raise ValueError("validation book %r not in bible output (books: %s)" % (v, " ".join(names)))
    if len(books) != 66:
        raise ValueError("expected 66 books, got %d" % len(books))
    return [{"name": name, "split": "val" if name in VAL_BOOKS else "train",
             "chapters": len(chs), "verses": sum(len(c) for c in chs),
             "text": corpus_book_text(chs)} for name, chs in books]


def corpus_join(books):
    """The plain-text form of a split: books separated by an empty line."""
    return "\n".join(b["text"] for b in books)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: corpus.py OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    books = corpus_build()
    summary = {"source": "bible -f '%s' (Debian bible-kjv, bible-kjv-text)" % BIBLE_RANGE,
               "val_books": VAL_BOOKS}
    for split in ("train", "val"):
        sel = [b for b in books if b["split"] == split]
        text = corpus_join(sel)
        with open(os.path.join(outdir, split + ".txt"), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        summary[split] = {"books": len(sel), "chapters": sum(b["chapters"] for b in sel),
                          "verses": sum(b["verses"] for b in sel), "bytes": len(text.encode()),
                          "words": len(text.split())}
    with open(os.path.join(outdir, "books.json"), "w") as f:
        json.dump(books, f)
    with open(os.path.join(outdir, "corpus.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("corpus: train %(books)d books, %(verses)d verses, %(bytes)d bytes, %(words)d words" % summary["train"])
    print("corpus: val   %(books)d books, %(verses)d verses, %(bytes)d bytes, %(words)d words" % summary["val"])


if __name__ == "__main__":
    main()
