"""Building a run's shortlist from parallel text: segment it as the model does, fit the
lexical table, keep the top targets and the frequent ones.

    shortlist = build_shortlist("runs/multi30k_en_de", k=20, n=500)
    shortlist.save(shortlist_path("runs/multi30k_en_de"))

A trained run reads its prepared training text by default; a run imported from fairseq
names no data, so its user gives the text (segmented by the run's SentencePiece model, or
read as the dictionaries' tokens when it has none).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import sentencepiece as spm

from convs2s_tf.data.data_directory import PreparedData
from convs2s_tf.data.text_files import LineDecoder, read_parallel_lines
from convs2s_tf.interop.fairseq_dictionary import Dictionary
from convs2s_tf.runs import RunDirectory
from convs2s_tf.shortlist.alignment import fit_ibm1
from convs2s_tf.shortlist.shortlist import SHORTLIST_FILE, Shortlist, ShortlistError

# The most pairs the table is fitted on by default: every link of a pair is an entry of
# the fitting arrays (about 30 x 30 per WMT pair), so larger corpora are cut here.
MAX_PAIRS = 1_000_000


def shortlist_path(model_dir: str) -> str:
    """Where a run keeps its shortlist."""
    return os.path.join(model_dir, SHORTLIST_FILE)


@dataclasses.dataclass(frozen=True)
class PairEncoder:
    """Turns text pairs into the model's source and target ids (no `</s>`).

    Attributes:
        encode_source: `line -> list of source ids`.
        encode_target: `line -> list of target ids`.
        source_vocab_size: The model's source vocabulary size.
        target_vocab_size: The model's target vocabulary size.
    """

    encode_source: Callable[[str], list[int]]
    encode_target: Callable[[str], list[int]]
    source_vocab_size: int
    target_vocab_size: int


def pair_encoder(model_dir: str) -> PairEncoder:
    """The `PairEncoder` of a run: its SentencePiece ids, or an imported run's
    dictionaries (after its SentencePiece segmentation, if any).

    Raises:
        ShortlistError: The run names no way to segment text.
    """
    run = RunDirectory(model_dir)
    run_config = run.read_config()
    model = run_config["model"]
    sizes = int(model["source_vocab_size"]), int(model["target_vocab_size"])
    sentencepiece_path = run.sentencepiece_model(run_config)
    processor = None
    if sentencepiece_path:
        processor = spm.SentencePieceProcessor(model_file=sentencepiece_path)
    files = run.vocabulary_files(run_config)
    if files is None:
        if processor is None:
            raise ShortlistError(
                f"{model_dir} names neither a SentencePiece model nor dictionaries."
            )
        return PairEncoder(processor.encode, processor.encode, *sizes)
    source_dict, target_dict = Dictionary.load(files.source), Dictionary.load(files.target)

    def tokens(line: str) -> str:
        return " ".join(processor.encode(line, out_type=str)) if processor else line

    return PairEncoder(
        lambda line: source_dict.encode_line(tokens(line)),
        lambda line: target_dict.encode_line(tokens(line)),
        *sizes,
    )


def training_files(model_dir: str) -> tuple[str, str]:
    """The prepared training text (source, target) of a trained run.

    Raises:
        ShortlistError: The run names no prepared data (e.g. an imported run).
    """
    run = RunDirectory(model_dir)
    data_dir = run.data_dir(run.read_config())
    if not data_dir:
        raise ShortlistError(
            f"{model_dir} names no prepared data (an imported run?): give the training text "
            "as `source_file` and `target_file`."
        )
    return PreparedData.load(data_dir).split_paths("train")


def build_shortlist(
    model_dir: str,
    k: int,
    n: int,
    source_file: str | None = None,
    target_file: str | None = None,
    max_pairs: int = MAX_PAIRS,
    iterations: int = 5,
) -> Shortlist:
    """Fits IBM model 1 on a run's training pairs and keeps its shortlist.

    Args:
        model_dir: The run directory (its vocabulary segments the text).
        k: Targets kept per source piece.
        n: Most frequent target pieces always decoded against.
        source_file, target_file: Parallel text; default the run's prepared training text.
        max_pairs: Fit on the first this many pairs.
        iterations: EM iterations.

    Returns:
        A `Shortlist` whose metadata names the files, pairs and method.

    Raises:
        ShortlistError: No text to fit, or only one of the two files given.
        CorpusFileNotFoundError, LineCountMismatchError, InvalidUtf8Error: The files.
    """
    if k < 1 or n < 0:
        raise ShortlistError(f"`k` must be >= 1 and `n` >= 0, got k={k}, n={n}.")
    if (source_file is None) != (target_file is None):
        raise ShortlistError("Give both `source_file` and `target_file`, or neither.")
    if source_file is None or target_file is None:  # both None (checked above)
        source_file, target_file = training_files(model_dir)
    encoder = pair_encoder(model_dir)
    pairs: list[tuple[list[int], list[int]]] = []
    for source, target in read_parallel_lines(source_file, target_file, LineDecoder("error")):
        if len(pairs) == max_pairs:
            break
        pairs.append((encoder.encode_source(source), encoder.encode_target(target)))
    table = fit_ibm1(pairs, encoder.source_vocab_size, encoder.target_vocab_size, iterations)
    metadata = dict(
        method="ibm_model_1",
        iterations=iterations,
        k=k,
        n=n,
        source_file=os.path.abspath(source_file),
        target_file=os.path.abspath(target_file),
        pairs=table.sentences,
    )
    return Shortlist(
        table.top_targets(k),
        table.most_frequent(n),
        encoder.target_vocab_size,
        metadata,
    )
