"""What loading an ensemble of runs checks: one run directory per member, one checkpoint
per member, and vocabularies the members share.

`model_dir="RUN_A,RUN_B"` names an ensemble, as fairseq's `--path a.pt:b.pt`; the members'
distributions are combined by `convs2s_tf.decoding.Ensemble`.
"""

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from convs2s_tf.inference.translator import InferenceError
from convs2s_tf.runs import RunDirectory

# Separates the members of an ensemble in `model_dir` and `checkpoint`.
SEPARATOR = ","


def split_paths(paths: str | Sequence[str] | None) -> list[str]:
    """The members named by `paths`: a comma-separated string, a list, or None."""
    if paths is None:
        return []
    if isinstance(paths, (list, tuple)):
        return [str(path) for path in paths]
    return [path.strip() for path in str(paths).split(SEPARATOR) if path.strip()]


def member_checkpoints(
    model_dirs: Sequence[str], checkpoint: str | Sequence[str] | None
) -> Sequence[str | None]:
    """One checkpoint (or None: the run's best, else latest) per member of `model_dirs`.

    Raises:
        InferenceError: `checkpoint` names another number of checkpoints than there are
            runs.
    """
    checkpoints = split_paths(checkpoint)
    if not checkpoints:
        return [None] * len(model_dirs)
    if len(checkpoints) != len(model_dirs):
        raise InferenceError(
            f"`checkpoint` names {len(checkpoints)} checkpoint(s) for {len(model_dirs)} run "
            "directories in `model_dir`: give one per run, in the same order, or none."
        )
    return checkpoints


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def vocabulary_identity(
    model_dir: str, run_config: Mapping[str, Any], sentencepiece_model: str | None = None
) -> dict[str, Any]:
    """What a member's ids mean: its vocabulary sizes and the files numbering them.

    Args:
        model_dir: The run directory.
        run_config: Its `config.json` content.
        sentencepiece_model: A SentencePiece model used instead of the run's (None: the
            run's).

    Returns:
        A dict of comparable entries (file contents by SHA-256, not by path, so that
        copies of one vocabulary match).
    """
    run = RunDirectory(model_dir)
    model_config = run_config.get("model", {})
    identity = {
        "source vocabulary size": model_config.get("source_vocab_size"),
        "target vocabulary size": model_config.get("target_vocab_size"),
    }
    vocabulary = run.vocabulary_files(run_config)
    if vocabulary is not None:
        identity["dictionary format"] = vocabulary.format
        identity["source dictionary"] = _sha256(vocabulary.source)
        identity["target dictionary"] = _sha256(vocabulary.target)
    if sentencepiece_model is None:
        sentencepiece_model = run.sentencepiece_model(run_config)
    identity["SentencePiece model"] = _sha256(sentencepiece_model) if sentencepiece_model else None
    return identity


def check_shared_vocabulary(
    model_dirs: Sequence[str],
    run_configs: Sequence[Mapping[str, Any]],
    sentencepiece_model: str | None = None,
) -> None:
    """Raises unless every run numbers its tokens as the first one does.

    Raises:
        InferenceError: Two runs differ in a vocabulary size, a dictionary or the
            SentencePiece model; the message names both run directories.
    """
    first = vocabulary_identity(model_dirs[0], run_configs[0], sentencepiece_model)
    for model_dir, run_config in zip(model_dirs[1:], run_configs[1:]):
        identity = vocabulary_identity(model_dir, run_config, sentencepiece_model)
        differences = [key for key in first if first[key] != identity.get(key)]
        differences += [key for key in identity if key not in first]
        if differences:
            raise InferenceError(
                f"The runs {model_dirs[0]} and {model_dir} do not share their vocabularies "
                f"(their {', '.join(differences)} differ): the members of an ensemble must "
                "use the same SentencePiece model and dictionaries."
            )
