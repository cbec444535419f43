"""Everything `python -m pipelines.train` does, importable: data, model, trainer, test BLEU."""

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

import tensorflow as tf
from absl import logging

from convs2s_tf.data.fingerprint import read_fingerprint
from convs2s_tf.data.pipeline import TrainingData, make_shard_eval_dataset
from convs2s_tf.data.prepare import FINGERPRINT_FILE, PreparedData
from convs2s_tf.data.text_files import read_lines
from convs2s_tf.data.tokenizer import Tokenizer
from convs2s_tf.decoding import SearchConfig
from convs2s_tf.evaluation import corpus_scores
from convs2s_tf.inference import CheckpointTranslator
from convs2s_tf.models.families import build_model
from convs2s_tf.runs import RunDirectory, load_trained_model
from convs2s_tf.runs.averaging import write_averaged_checkpoint
from convs2s_tf.training.budget import WallClockLimit
from convs2s_tf.training.config import TrainingConfig
from convs2s_tf.training.coordination import Preempted, PreemptionWatch
from convs2s_tf.training.strategies import create_strategy
from convs2s_tf.training.trainer import PREEMPTED, Trainer

# Imported from here by earlier callers.
__all__ = ["WallClockLimit", "run_training", "average_last_epoch_ends", "evaluate_best"]


def file_sha256(path: str) -> str:
    """The SHA-256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_training(
    data_dir: str,
    model_dir: str,
    model_config: Mapping[str, Any],
    training_config: TrainingConfig,
    train_dataset_kwargs: Mapping[str, Any],
    eval_dataset_kwargs: Mapping[str, Any],
    strategy_name: str = "mirrored",
    max_train_minutes: float = 0.0,
    anneal_final_minutes: float = 0.0,
    test_beam_size: int = 5,
    hparams: Mapping[str, Any] | None = None,
    strategy: tf.distribute.Strategy | None = None,
) -> dict[str, Any]:
    """Trains on prepared data in `data_dir`, averages the last epoch ends if
    `training_config.average_last_n`, then reports the test BLEU of the model the run
    ends with (the averaged one, else the best checkpoint). With `anneal_final_minutes`
    (and `max_train_minutes`), the learning rate is shrunk once by the config's
    `lr_shrink` at the first epoch end within that many minutes of the time limit.

    The budget and the cooldown are the run's, over all its processes: a resumed run
    continues them. A run that had finished trains nothing; its test scores are those
    `test_results.json` holds if they are of its last step and `test_beam_size`, else
    it is tested again. A SIGTERM during the test translation stops it (the
    `stop_reason` is then `PREEMPTED`, and a re-run tests the finished run).

    Returns:
        A dict with the training result and, if `test_beam_size`, the test scores.
    """
    # Outside the training loop (whose own watch turns SIGTERM into a vote), a SIGTERM
    # stops at once: nothing there writes a checkpoint, and a re-run redoes the rest.
    trainer = None
    try:
        with PreemptionWatch(raises=True):
            trainer, prepared, training_data, valid = _trainer(
                data_dir,
                model_dir,
                model_config,
                training_config,
                train_dataset_kwargs,
                eval_dataset_kwargs,
                strategy or create_strategy(strategy_name),
                hparams,
            )
            trainer.time_limit = WallClockLimit(
                max_train_minutes, final_minutes=anneal_final_minutes
            )
            result = trainer.train(training_data, valid)
            if result["stop_reason"] == PREEMPTED or not trainer.is_chief:
                return result
            if trainer.preemption.requested:
                # A SIGTERM during the last epoch end's save: the run is saved.
                raise Preempted("SIGTERM")
            return _finish(model_dir, prepared, training_config, test_beam_size, result)
    except Preempted:
        step = int(trainer.state.step.numpy()) if trainer is not None else 0
        return {"step": step, "stop_reason": PREEMPTED}


def _trainer(
    data_dir: str,
    model_dir: str,
    model_config: Mapping[str, Any],
    training_config: TrainingConfig,
    train_dataset_kwargs: Mapping[str, Any],
    eval_dataset_kwargs: Mapping[str, Any],
    strategy: tf.distribute.Strategy,
    hparams: Mapping[str, Any] | None,
) -> tuple[Trainer, PreparedData, TrainingData, tf.data.Dataset]:
    """Returns (the run's `Trainer`, its run config written; its `PreparedData`; its
    `TrainingData`; its validation dataset)."""
    prepared = PreparedData.load(data_dir)
    tokenizer = Tokenizer(prepared.sentencepiece_model_path)
    if tokenizer.vocab_size != model_config["source_vocab_size"]:
        raise ValueError(
            f"The model expects {model_config['source_vocab_size']} tokens but the "
            f"SentencePiece model in {data_dir} has {tokenizer.vocab_size}."
        )
    training_data = TrainingData(
        prepared.shard_paths("train"), prepared.length_index("train"), **train_dataset_kwargs
    )
    logging.info("Training data: %s", training_data.stats())
    valid = make_shard_eval_dataset(
        prepared.shard_paths("validation"),
        prepared.length_index("validation"),
        **eval_dataset_kwargs,
    ).dataset
    trainer = Trainer(
        lambda: build_model(model_config),
        training_config,
        model_dir,
        strategy,
        tokenizer=tokenizer,
        hparams=hparams,
    )
    trainer.data_fingerprint = read_fingerprint(os.path.join(data_dir, FINGERPRINT_FILE))
    trainer.write_run_config(
        {
            "model": model_config,
            "data_dir": os.path.abspath(data_dir),
            "data_fingerprint": trainer.data_fingerprint,
            "sentencepiece_model": os.path.abspath(prepared.sentencepiece_model_path),
            "vocabulary_sha256": file_sha256(prepared.sentencepiece_model_path),
        }
    )
    logging.info(
        "%d steps an epoch on %s",
        training_data.steps_per_epoch(trainer.placement),
        trainer.placement,
    )
    return trainer, prepared, training_data, valid


def _finish(
    model_dir: str,
    prepared: PreparedData,
    training_config: TrainingConfig,
    test_beam_size: int,
    result: dict[str, Any],
) -> dict[str, Any]:
    """The chief's end of a run: averages the epoch ends and tests the model the run
    ends with, unless `test_results.json` holds the test of this step already."""
    results_path = RunDirectory(model_dir).test_results_path
    if result.get("already_finished"):
        recorded = _recorded_test_results(results_path, result["step"], test_beam_size)
        if recorded is not None:
            print(f"{results_path} holds the test scores of this run already.", flush=True)
            return {**recorded, **result}
    result = {**result, **average_last_epoch_ends(model_dir, training_config.average_last_n)}
    if test_beam_size:
        search_config = SearchConfig(beam_size=test_beam_size)
        result.update(evaluate_best(model_dir, prepared, search_config))
        _write_json_atomically(results_path, result)
    return result


def _recorded_test_results(path: str, step: int, beam_size: int) -> dict[str, Any] | None:
    """The test results in `path` if they are of `step` and beam `beam_size`, else None
    (none there, or torn)."""
    try:
        with tf.io.gfile.GFile(path) as f:
            recorded = json.load(f)
    except (tf.errors.NotFoundError, ValueError):
        return None
    if recorded.get("step") != step or recorded.get("test_beam_size") != beam_size:
        return None
    return recorded


def _write_json_atomically(path: str, value: Any) -> None:
    """Writes `value` as JSON to `path` through a temporary file renamed over it, so a
    kill never leaves it half written."""
    temporary = f"{path}.tmp"
    with tf.io.gfile.GFile(temporary, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
    tf.io.gfile.rename(temporary, path, overwrite=True)


def average_last_epoch_ends(model_dir: str, count: int) -> dict[str, Any]:
    """Writes the mean of the run's last `count` epoch ends into its `averaged/`.

    Args:
        model_dir: The run directory.
        count: Epoch ends to average (`TrainingConfig.average_last_n`); 0 averages
            nothing.

    Returns:
        `{"averaged_checkpoint": path, "averaged_from": [paths]}`, or {} when nothing
        was averaged.
    """
    run = RunDirectory(model_dir)
    if not count:
        if run.averaged_checkpoint():
            logging.warning(
                "%s holds an earlier run's averaged epoch ends and inference prefers it; "
                "remove it to use %s.",
                run.averaged_dir,
                run.best_dir,
            )
        return {}
    paths = run.epoch_end_checkpoints()[-count:]
    if not paths:
        logging.warning("No epoch end in %s: nothing to average.", run.epoch_ends_dir)
        return {}
    if len(paths) < count:
        logging.warning("Only %d epoch ends to average (asked for %d).", len(paths), count)
    path = write_averaged_checkpoint(model_dir, paths)
    print(f"Averaged the last {len(paths)} epoch ends into {path}", flush=True)
    return {"averaged_checkpoint": path, "averaged_from": paths}


def evaluate_best(
    model_dir: str, prepared: PreparedData, search_config: SearchConfig, split: str = "test"
) -> dict[str, Any]:
    """Scores `split` with the model the run ends with (`RunDirectory.find_checkpoint`:
    the averaged one, else the best, else the latest) exactly as `pipelines.evaluate`
    does with default flags: same loading, batches and search."""
    model, tokenizer, path, _ = load_trained_model(model_dir, compute_dtype=search_config.dtype)
    source_path, reference_path = prepared.split_paths(split)
    translator = CheckpointTranslator(model, tokenizer, search_config)
    hypotheses = translator.translate_all(read_lines(source_path))
    scores = corpus_scores(hypotheses, read_lines(reference_path))
    message = (
        f"{split} BLEU {scores['bleu']:.2f} ({scores['bleu_signature']}), chrF "
        f"{scores['chrf']:.2f}, beam {search_config.beam_size}, checkpoint {path}"
    )
    print(message, flush=True)
    logging.info(message)
    return {
        f"{split}_checkpoint": path,
        f"{split}_beam_size": search_config.beam_size,
        **{f"{split}_{key}": value for key, value in scores.items()},
    }
