#!/usr/bin/env python3
"""Checks otc-data --tokenizer's shards against the tokenizer library's own
encoding: the shards' ids (read from the llm.c header: version 1 uint16 or
version 2 uint32) must be, document after document, the separator token
followed by the library's ids of the file (no special tokens added); and
decoding them back through otc-tokenize.py --decode must give the library's
own decode of its ids (the text itself for a byte-level BPE).

    check_token_shards.py TOKENIZER SEPARATOR_TOKEN OTC_TOKENIZE SHARD TEXT...

Prints the shard's version and token count, "ids ok" and "round trip ok",
or what differs.
"""
import struct
import subprocess
import sys


def load(path):
    if path.endswith(".model"):
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor()
        sp.Load(path)
        return (lambda t: sp.EncodeAsIds(t)), (lambda ids: sp.DecodeIds(ids)), \
            (lambda tok: sp.PieceToId(tok))
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    return (lambda t: tok.encode(t, add_special_tokens=False).ids), \
        (lambda ids: tok.decode(ids, skip_special_tokens=False)), \
        (lambda name: tok.token_to_id(name))


def main():
    path, sep_name, helper, shard = sys.argv[1:5]
    texts = [open(p, encoding="utf-8").read() for p in sys.argv[5:]]
    encode, decode, token_id = load(path)
    data = open(shard, "rb").read()
    magic, version, count = struct.unpack("<3i", data[:12])
    width = {1: 2, 2: 4}[version]
    ids = list(struct.unpack("<%d%s" % (count, "H" if width == 2 else "I"),
                             data[1024:1024 + width * count]))
    print("version %d, %d tokens, largest id %d" % (version, count, max(ids)))
    sep = token_id(sep_name)
    want = []
    for t in texts:
        want += [sep] + encode(t)
    if ids != want:
        first = next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b),
                     min(len(ids), len(want)))
        print("ids differ at %d of %d/%d" % (first, len(ids), len(want)))
        return
    print("ids ok")
    # Each document's ids (after its separator) back to text.
    at = 0
    for t in texts:
        n = 1 + len(encode(t))
        doc = ids[at + 1:at + n]
        at += n
        got = subprocess.run(
            [sys.executable, helper, "--tokenizer", path, "--decode"],
            input=struct.pack("<%dI" % len(doc), *doc), capture_output=True,
            check=True).stdout.decode("utf-8")
        if got != decode(doc):
            print("round trip differs: %r" % got[:80])
            return
        if path.endswith("bpe.json") and got != t:
            print("byte-level BPE round trip is not the text: %r" % got[:80])
            return
    print("round trip ok")


if __name__ == "__main__":
    main()
