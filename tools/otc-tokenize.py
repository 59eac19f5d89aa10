#!/usr/bin/env python3
"""Token ids of text files under a model's own tokenizer, for otc-data.

    otc-tokenize.py --tokenizer PATH [--doc-token TOKEN] [--decode] FILE...

PATH is a Hugging Face tokenizer.json (BPE, Unigram, WordPiece: read by the
`tokenizers` library) or a SentencePiece model (`*.model`: the
`sentencepiece` library). Each FILE is one document; every document starts
with the separator token: --doc-token, else the tokenizer's beginning-of-text
token (Llama's <s>, <|begin_of_text|>, <bos>), else its end-of-text token
(GPT-2's <|endoftext|>, </s>, <eos>), else none. The tokenizer adds no other
special tokens.

Writes to stdout, little-endian: uint32 vocabulary size, int32 separator id
(-1: none), uint64 token count, then the token ids as uint32. Progress goes to
stderr when the text is large; an error is one line `otc-data: error: ...`
on stderr and exit status 2.

With --decode, reads uint32 ids from stdin instead and writes their text to
stdout (UTF-8): the inverse, for a sample or a check.
"""
import argparse
import array
import os
import struct
import sys
import time

BEGIN = ["<|begin_of_text|>", "<s>", "<bos>", "[CLS]"]
END = ["<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "[SEP]"]
MASK = ["[MASK]", "<mask>", "<|mask|>"]


def fail(message):
    sys.stderr.write("otc-data: error: %s\n" % message)
    sys.exit(2)


class HfTokenizer:
    def __init__(self, path):
        try:
            import tokenizers
        except ImportError:
            fail("--tokenizer %s needs Python's tokenizers package "
                 "(pip install tokenizers)" % path)
        try:
            self.tok = tokenizers.Tokenizer.from_file(path)
        except Exception as e:  # the library's own message
            fail("cannot read tokenizer %s: %s" % (path, str(e).splitlines()[0]))

    def vocab_size(self):
        return self.tok.get_vocab_size(with_added_tokens=True)

    def token_id(self, token):
        return self.tok.token_to_id(token)

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_all(self, texts):
        # The library encodes a batch on all cores.
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)


class SpTokenizer:
    def __init__(self, path):
        try:
            import sentencepiece
        except ImportError:
            fail("--tokenizer %s needs Python's sentencepiece package "
                 "(Debian: python3-sentencepiece; pip install sentencepiece)" % path)
        self.sp = sentencepiece.SentencePieceProcessor()
        try:
            ok = self.sp.Load(path)
        except Exception as e:
            fail("cannot read SentencePiece model %s: %s" % (path, str(e).splitlines()[0]))
        if not ok:
            fail("cannot read SentencePiece model %s" % path)

    def vocab_size(self):
        return self.sp.GetPieceSize()

    def token_id(self, token):
        i = self.sp.PieceToId(token)
        return None if i == self.sp.unk_id() and token != self.sp.IdToPiece(i) else i

    def encode(self, text):
        return self.sp.EncodeAsIds(text)

    def encode_all(self, texts):
        return [self.sp.EncodeAsIds(t) for t in texts]

    def decode(self, ids):
        return self.sp.DecodeIds(list(ids))

    def separator(self):
        if self.sp.bos_id() >= 0:
            return self.sp.bos_id()
        if self.sp.eos_id() >= 0:
            return self.sp.eos_id()
        return None


def load(path):
    if not os.path.exists(path):
        fail("cannot read tokenizer %s: no such file" % path)
    if path.endswith(".model"):
        return SpTokenizer(path)
    return HfTokenizer(path)


def separator(tok, doc_token):
    if doc_token:
        i = tok.token_id(doc_token)
        if i is None:
            fail("--doc-token '%s' is not a token of the tokenizer" % doc_token)
        return i
    if isinstance(tok, SpTokenizer):
        return tok.separator()
    for name in BEGIN + END:
        i = tok.token_id(name)
        if i is not None:
            return i
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--doc-token", default="")
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    tok = load(a.tokenizer)
    out = sys.stdout.buffer
    if a.decode:
        data = sys.stdin.buffer.read()
        ids = struct.unpack("<%dI" % (len(data) // 4), data[: len(data) // 4 * 4])
        out.write(tok.decode(ids).encode("utf-8"))
        return
    sep = separator(tok, a.doc_token)
    # A masked LM (an encoder) trains from the shards with `--mlm ID`.
    for name in MASK:
        i = tok.token_id(name)
        if i is not None:
            sys.stderr.write("otc-data: note: the tokenizer's mask token is %s "
                             "(id %d): train an encoder (a masked LM) from "
                             "these shards with --mlm %d\n" % (name, i, i))
            break
    sizes = []
    for path in a.files:
        try:
            sizes.append(os.path.getsize(path))
        except OSError as e:
            fail("cannot read %s: %s" % (path, e.strerror))
    total = sum(sizes)
    ids = array.array("I")
    done = 0
    start = last = time.monotonic()
    # Files in batches of up to 64 or 64 MiB, each batch encoded at once.
    batch, batch_bytes = [], 0

    def flush():
        nonlocal batch, batch_bytes, done, last
        texts = []
        for path in batch:
            try:
                with open(path, encoding="utf-8") as f:
                    texts.append(f.read())
            except UnicodeDecodeError as e:
                fail("%s is not UTF-8 text (byte %d)" % (path, e.start))
            except OSError as e:
                fail("cannot read %s: %s" % (path, e.strerror))
        for doc in tok.encode_all(texts):
            if sep is not None:
                ids.append(sep)
            ids.extend(doc)
        done += batch_bytes
        batch, batch_bytes = [], 0
        now = time.monotonic()
        if now - last >= 2.0 or (now - start >= 2.0 and done == total):
            sys.stderr.write("otc-data: tokenized %.1f of %.1f MiB (%d tokens)\n"
                             % (done / 2**20, total / 2**20, len(ids)))
            last = now

    for path, size in zip(a.files, sizes):
        batch.append(path)
        batch_bytes += size
        if len(batch) >= 64 or batch_bytes >= 64 << 20:
            flush()
    if batch:
        flush()
    out.write(struct.pack("<IiQ", tok.vocab_size(), -1 if sep is None else sep, len(ids)))
    if sys.byteorder != "little":
        ids.byteswap()
    out.write(ids.tobytes())


if __name__ == "__main__":
    main()
