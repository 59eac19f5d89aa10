#!/usr/bin/env python3
"""Makes the tokenizers the otc-data --tokenizer tests read, with the
libraries themselves, from the test corpus (deterministic: the same files on
every run):

- bpe.json: a byte-level BPE (GPT-2's kind) of 400 tokens with
  <|endoftext|>, trained by tokenizers' BpeTrainer;
- unigram.model: a SentencePiece unigram model of 80 pieces (Llama-2's
  kind, with <s> and </s>), trained by SentencePieceTrainer;
- wordpiece.json (BERT's kind, documents after [CLS]) and unigram.json (a
  Unigram of the tokenizers library, documents after <s>), trained by its
  trainers;
- wide.json: a word-level tokenizer of 70,001 tokens ("[UNK]", "w0" ...
  "w69999", split on whitespace), whose ids pass 65,535, and wide.txt, a
  cycle of words from all over it.

    make_tokenizers.py CORPUS OUTDIR
"""
import os
import sys


def main():
    corpus, out = sys.argv[1:3]
    os.makedirs(out, exist_ok=True)
    text = open(corpus, encoding="utf-8").read()

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        text.splitlines(),
        trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                            show_progress=False))
    bpe.save(os.path.join(out, "bpe.json"))

    # The library's other two kinds: WordPiece (BERT's, [CLS] ... [SEP])
    # and Unigram.
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    wp.train_from_iterator(
        text.splitlines(),
        trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                  show_progress=False))
    wp.save(os.path.join(out, "wordpiece.json"))
    uni = Tokenizer(models.Unigram())
    uni.pre_tokenizer = pre_tokenizers.Metaspace()
    uni.decoder = decoders.Metaspace()
    uni.train_from_iterator(
        text.splitlines(),
        trainers.UnigramTrainer(vocab_size=100, special_tokens=["<unk>", "<s>", "</s>"],
                                unk_token="<unk>", show_progress=False))
    uni.save(os.path.join(out, "unigram.json"))

    vocab = {"[UNK]": 0}
    for i in range(70000):
        vocab["w%d" % i] = len(vocab)
    wide = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    wide.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    wide.decoder = decoders.WordPiece()  # joins the words with spaces
    wide.save(os.path.join(out, "wide.json"))
    with open(os.path.join(out, "wide.txt"), "w") as f:
        # A cycle of 24 words from all over the vocabulary (ids past 65,535
        # among them), 17 times: a model learns it in a few steps.
        cycle = ["w%d" % (i * 7919 % 70000) for i in range(20)]
        cycle += ["w69999", "w65535", "w65536", "w0"]
        f.write(" ".join(cycle * 17) + "\n")

    import sentencepiece as spm
    spm.SentencePieceTrainer.Train(
        input=corpus, model_prefix=os.path.join(out, "unigram"), vocab_size=80,
        model_type="unigram", character_coverage=1.0, num_threads=1,
        bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)


if __name__ == "__main__":
    main()
