#!/usr/bin/env python3
"""The Python side of bench/tokenizer_compare.sh: the corpus, and Hugging Face `tokenizers` and
`tiktoken` trained / encoding on it, timed the way lmtrain times itself (`lmtrain tokenize
--timing`: the work only, not reading the corpus or writing results).

  corpus OUT.jsonl --mb MB      a deterministic English-like corpus, one JSON document per line
  train-hf CORPUS --vocab_size V --output tokenizer.json
                                `tokenizers` BpeTrainer + ByteLevel (GPT-2 regex), like lmtrain
  encode CORPUS --tool hf|tiktoken --tokenizer lmtrain/tokenizer.json --threads K [--check IDS]
                                encodes every document on its own with lmtrain's vocabulary;
                                --check compares the ids with `lmtrain tokenize --documents`'s

Each timed command prints one line of `key: value` fields (seconds, MB/s, tokens/s) that the
shell script reads. Thread counts: `tokenizers` uses Rayon, so RAYON_NUM_THREADS must be set
before it starts (the shell script does); tiktoken's batch API uses a thread pool of K.
"""
import argparse
import json
import os
import random
import sys
import time

FORTUNES = "/usr/share/games/fortunes"


def load_corpus(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def fields(**kv):
    print(" ".join(f"{k}: {v}" for k, v in kv.items()), flush=True)


# ---- corpus


def make_corpus(out, mb, seed):
    """Text from a word bigram chain over Debian's fortunes (real words, punctuation, numbers,
    line breaks, some UTF-8), with 2% of the words mutated so that, like a real corpus, it keeps
    meeting words it has not seen. Documents of 30 to ~3000 words; deterministic for a seed."""
    rng = random.Random(seed)
    words = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for fortune in f.read().split("\n%\n"):
                for line in fortune.split("\n"):
                    words.extend(line.split())
                    words.append("\n")
    follow = {}
    for a, b in zip(words, words[1:]):
        follow.setdefault(a, []).append(b)
    keys = sorted(follow)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    limit = int(mb * 1e6)
    size = 0
    with open(out, "w", encoding="utf-8") as f:
        while size < limit:
            n = min(3000, int(rng.lognormvariate(5.5, 0.9)) + 30)
            w = rng.choice(keys)
            parts = []
            for _ in range(n):
                nexts = follow.get(w)
                w = rng.choice(nexts) if nexts and rng.random() > 0.01 else rng.choice(keys)
                r = rng.random()
                if r < 0.02 and w.isalpha() and len(w) > 2:  # a word it has not seen
                    i = rng.randrange(len(w))
                    parts.append(w[:i] + rng.choice(letters) + w[i + 1 :])
                elif r < 0.025:
                    parts.append(str(rng.randrange(10 ** rng.randint(1, 7))))
                else:
                    parts.append(w)
            text = " ".join(parts).replace(" \n ", "\n").strip()
            if not text:
                continue
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            size += len(text.encode("utf-8"))
    print(f"corpus: {out} {size / 1e6:.1f} MB of text")


# ---- training


def train_hf(args):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers

    texts = load_corpus(args.corpus)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    tok = Tokenizer(models.BPE())
    # ByteLevel with use_regex: GPT-2's pattern, as lmtrain's pre-tokenizer; no prefix space.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab_size,  # as lmtrain's: 256 bytes + merges + <|endoftext|>
        min_frequency=0,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    t0 = time.perf_counter()
    tok.train_from_iterator(texts, trainer, length=len(texts))
    dt = time.perf_counter() - t0
    if args.output:
        tok.save(args.output)
    fields(tool="tokenizers", vocab=tok.get_vocab_size(), seconds=f"{dt:.3f}",
           MB_per_s=f"{nbytes / 1e6 / dt:.2f}")


# ---- encoding


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (the alphabet of tokenizer.json)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiktoken_encoding(path):
    """lmtrain's tokenizer.json as a tiktoken Encoding: each token's bytes ranked by its id (a
    trained vocabulary gives merged tokens ids in merge order), the same regex, the same
    special tokens."""
    import tiktoken

    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    decode = {c: b for b, c in bytes_to_unicode().items()}
    specials = {t["content"]: t["id"] for t in j.get("added_tokens", [])}
    ranks = {
        bytes(decode[c] for c in tok): i
        for tok, i in j["model"]["vocab"].items()
        if tok not in specials
    }
    pre = j["pre_tokenizer"]
    assert pre["type"] == "ByteLevel" and pre.get("use_regex", True), pre
    from_lmtrain = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    return tiktoken.Encoding(name="lmtrain", pat_str=from_lmtrain, mergeable_ranks=ranks,
                             special_tokens=specials)


def encode(args):
    texts = load_corpus(args.corpus)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    if args.tool == "hf":
        from tokenizers import Tokenizer
        import tokenizers

        tok = Tokenizer.from_file(args.tokenizer)
        # encode_batch_fast (0.21+) skips the offsets; the same ids, the faster call.
        batch = getattr(tok, "encode_batch_fast", tok.encode_batch)
        t0 = time.perf_counter()
        encs = batch(texts, add_special_tokens=False)
        dt = time.perf_counter() - t0
        ids = [e.ids for e in encs]
        version = tokenizers.__version__
    else:
        import tiktoken

        enc = tiktoken_encoding(args.tokenizer)
        t0 = time.perf_counter()
        if args.threads == 1:
            ids = [enc.encode_ordinary(t) for t in texts]
        else:
            ids = enc.encode_ordinary_batch(texts, num_threads=args.threads)
        dt = time.perf_counter() - t0
        version = tiktoken.__version__
    ntok = sum(len(x) for x in ids)
    same = "n/a"
    if args.check:
        with open(args.check) as f:
            ref = [list(map(int, line.split())) for line in f]
        differ = sum(a != b for a, b in zip(ids, ref)) + abs(len(ref) - len(ids))
        same = "yes" if differ == 0 else f"no({differ}_of_{len(ids)}_documents_differ)"
    fields(tool=args.tool, version=version, threads=args.threads, seconds=f"{dt:.3f}",
           MB_per_s=f"{nbytes / 1e6 / dt:.2f}", tokens=ntok,
           tokens_per_s=f"{ntok / dt:.0f}", ids_identical=same)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("out")
    c.add_argument("--mb", type=float, default=100)
    c.add_argument("--seed", type=int, default=28)
    t = sub.add_parser("train-hf")
    t.add_argument("corpus")
    t.add_argument("--vocab_size", type=int, required=True)
    t.add_argument("--output")
    e = sub.add_parser("encode")
    e.add_argument("corpus")
    e.add_argument("--tool", choices=["hf", "tiktoken"], required=True)
    e.add_argument("--tokenizer", required=True)
    e.add_argument("--threads", type=int, default=1)
    e.add_argument("--check")
    a = p.parse_args()
    if a.cmd == "corpus":
        make_corpus(a.out, a.mb, a.seed)
    elif a.cmd == "train-hf":
        train_hf(a)
    else:
        encode(a)


if __name__ == "__main__":
    sys.exit(main())
