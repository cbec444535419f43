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
