"""The Multi30k text embedded in the package, for data tests that need real sentences."""

import gzip
import os

from .subprocesses import ROOT

MULTI30K_RAW_DIR = os.path.join(ROOT, "convs2s_tf", "datasets", "multi30k", "raw")


def multi30k_lines(stem, language, count):
    """Returns the first `count` lines of an embedded Multi30k file (e.g. "train", "en")."""
    with gzip.open(
        os.path.join(MULTI30K_RAW_DIR, f"{stem}.{language}.gz"), "rt", encoding="utf-8"
    ) as f:
        return [next(f).rstrip("\n") for _ in range(count)]


def write_multi30k_split(prefix, stem, count, compress=False):
    """Writes the first `count` English-German pairs of an embedded Multi30k file as the
    local corpus files `{prefix}.en` and `{prefix}.de` (gzip, `.gz` added, if `compress`)."""
    for language in ("en", "de"):
        text = "".join(line + "\n" for line in multi30k_lines(stem, language, count))
        if compress:
            with gzip.open(f"{prefix}.{language}.gz", "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            with open(f"{prefix}.{language}", "w", encoding="utf-8") as f:
                f.write(text)


def write_local_corpus(root, train, validation, test):
    """Writes a local en-de corpus of the first `train` training pairs (gzip) and the first
    `validation` and `test` pairs of the validation and test_2016_flickr splits (plain)
    into the directory `root`; returns {split: prefix}."""
    sizes = {
        "train": ("train", train),
        "validation": ("val", validation),
        "test": ("test_2016_flickr", test),
    }
    os.makedirs(root, exist_ok=True)
    prefixes = {}
    for split, (stem, count) in sizes.items():
        prefixes[split] = os.path.join(str(root), split)
        write_multi30k_split(prefixes[split], stem, count, compress=split == "train")
    return prefixes


def local_corpus_flags(prefixes):
    """The data flags that describe `prefixes` ({split: prefix}, as `write_local_corpus`
    returns them) as a local English-German corpus with a 500-piece BPE, for pipeline and
    benchmark commands and flagfiles."""
    splits = {"train": "train_prefix", "validation": "valid_prefix", "test": "test_prefix"}
    return [
        "--dataset=local",
        *(f"--{flag}={prefixes[split]}" for split, flag in splits.items() if split in prefixes),
        "--source_lang=en",
        "--target_lang=de",
        "--vocab_size=500",
    ]


# A 16-wide model of two blocks a side: the smallest the pipelines train in seconds.
TINY_MODEL_FLAGS = [
    "--embed_dim=16",
    "--encoder_layers=[(16, 3)] * 2",
    "--decoder_layers=[(16, 3)] * 2",
    "--decoder_out_embed_dim=16",
]

# PoseNet at the same size: 16 wide, one layer a side.
POSENET_TINY_FLAGS = [
    "--family=posenet",
    "--preset=posenet_multi30k_cpu",
    "--hidden_dim=16",
    "--num_heads=2",
    "--ffn_dim=32",
    "--encoder_layers=1",
    "--decoder_layers=1",
    "--optimizer=adam",
    "--warmup=noam",
    "--warmup_steps=10",
    "--learning_rate=1e-3",
]
