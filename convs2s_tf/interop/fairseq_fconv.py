"""Conversion of fairseq `fconv` translation checkpoints into runs of this project.

`convert_checkpoint` reads the authors' checkpoint (`fairseq_checkpoint`: the file,
safely, its model arguments and tensors), builds the `ConvS2S` it describes and copies
its weights (`fairseq_model`, `fairseq_weights`: the mapping, parameter for parameter,
is described there), then writes a run directory (`convs2s_tf.runs.RunDirectory`) that
translation, evaluation and export take as `--model_dir`.

The names of those modules are importable from here too.
"""

import collections
import os
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from convs2s_tf.interop.fairseq_checkpoint import (  # noqa: F401 (re-exported)
    FCONV_ARCHITECTURES,
    FairseqImportError,
    StateDict,
    check_architecture,
    fconv_settings,
    model_arguments,
    read_checkpoint,
    weight_norm_name,
)
from convs2s_tf.interop.fairseq_dictionary import Dictionary
from convs2s_tf.interop.fairseq_model import (  # noqa: F401 (re-exported)
    build_model,
    load_fairseq_model,
    model_config,
)
from convs2s_tf.interop.fairseq_weights import assign_weights  # noqa: F401 (re-exported)
from convs2s_tf.runs.run_directory import BEST_SUBDIR, CONFIG_FILE, RunDirectory

VOCABULARY_FORMAT = "fairseq_dictionary"


ConversionResult = collections.namedtuple(
    "ConversionResult", ["output_dir", "checkpoint_path", "run_config", "architecture"]
)
ConversionResult.__doc__ = """What `convert_checkpoint` wrote.

Fields:
    output_dir: The run directory (`--model_dir` of the other pipelines).
    checkpoint_path: The TensorFlow checkpoint written under `output_dir/best/`.
    run_config: The content of `output_dir/config.json`.
    architecture: The fairseq architecture name found in the checkpoint.
"""


def _jsonable(value: object) -> Any:
    """`value` with anything JSON cannot hold replaced by its `repr`."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return repr(value)


def _check_sentencepiece(path: str, dictionaries: Iterable[tuple[str, Dictionary]]) -> None:
    """Refuses a SentencePiece model whose pieces are not the dictionaries' tokens."""
    import sentencepiece as spm

    if not os.path.isfile(path):
        raise FileNotFoundError(f"SentencePiece model {path} does not exist.")
    try:
        processor = spm.SentencePieceProcessor(model_file=path)
    except Exception as error:  # noqa: BLE001 (sentencepiece raises plain errors)
        raise FairseqImportError(f"{path} is not a SentencePiece model ({error}).") from None
    pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
    for name, dictionary in dictionaries:
        tokens = dictionary.symbols[4:]
        known = sum(token in pieces for token in tokens)
        if tokens and known < 0.5 * len(tokens):
            raise FairseqImportError(
                f"Only {known} of the {len(tokens)} tokens of the {name} dictionary are "
                f"pieces of {path}: the fairseq model was not trained on this SentencePiece "
                "model's pieces. Leave `sentencepiece_model` out to translate pre-tokenised "
                "text."
            )


def convert_checkpoint(
    checkpoint_path: str,
    source_dict: str,
    target_dict: str,
    output_dir: str,
    sentencepiece_model: str | None = None,
) -> ConversionResult:
    """Converts a fairseq `fconv` checkpoint into a run directory of this project.

    The run directory holds `config.json`, the checkpoint in `best/`, the two
    dictionaries (fairseq format, ids unchanged) and, if given, the SentencePiece model
    the fairseq data was segmented with. `pipelines.translate`, `pipelines.evaluate` and
    `pipelines.export` take it as `--model_dir`; without a SentencePiece model they read
    and write space-separated tokens of the dictionaries, as fairseq does.

    Args:
        checkpoint_path: fairseq `.pt` checkpoint of an `fconv` translation model.
        source_dict: The source `dict.txt`.
        target_dict: The target `dict.txt` (the same file for a joined dictionary).
        output_dir: The run directory to create; it must not hold a run already.
        sentencepiece_model: Optional SentencePiece model whose pieces are the
            dictionaries' tokens (text is then segmented and detokenised in-graph).

    Returns:
        A `ConversionResult`.

    Raises:
        FileNotFoundError: An input file is missing.
        FairseqImportError: Anything that makes the conversion impossible, explained.
    """
    for path in (checkpoint_path, source_dict, target_dict):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} does not exist.")
    run = RunDirectory(output_dir)
    if run.holds_run():
        raise FairseqImportError(
            f"{output_dir} already holds a run ({CONFIG_FILE} or {BEST_SUBDIR}/); choose "
            "another `output_dir` or remove it."
        )
    source_dictionary = Dictionary.load(source_dict)
    target_dictionary = Dictionary.load(target_dict)
    if sentencepiece_model:
        _check_sentencepiece(
            sentencepiece_model, [("source", source_dictionary), ("target", target_dictionary)]
        )
    model, config, architecture, arguments = load_fairseq_model(
        checkpoint_path, source_dictionary, target_dictionary
    )
    vocabulary = run.write_vocabulary(
        VOCABULARY_FORMAT, source_dict, target_dict, sentencepiece_model or None
    )
    saved = run.save_best(tf.train.Checkpoint(model=model))
    run_config = {
        "model": config,
        **vocabulary,
        "fairseq": {
            "checkpoint": os.path.abspath(checkpoint_path),
            "architecture": architecture,
            "arguments": _jsonable(arguments),
            "source_dict": os.path.abspath(source_dict),
            "target_dict": os.path.abspath(target_dict),
        },
    }
    # Written last: a directory without config.json holds no finished run.
    run.write_config(run_config)
    return ConversionResult(output_dir, saved, run_config, architecture)
