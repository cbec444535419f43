"""Everything `python -m pipelines.train` does, importable: data, model, trainer, test BLEU."""

import json
import os
import time

import tensorflow as tf
from absl import logging

from convs2s_tf.data.pipeline import TrainingDatasetFn, make_eval_dataset
from convs2s_tf.data.prepare import PreparedData
from convs2s_tf.data.tokenizer import Tokenizer
from convs2s_tf.decoding import best_hypothesis_function
from convs2s_tf.evaluation import corpus_scores
from convs2s_tf.models import ConvS2S
from convs2s_tf.training.checkpoints import latest_checkpoint, restore_checkpoint
from convs2s_tf.training.strategies import create_strategy
from convs2s_tf.training.trainer import Trainer


class WallClockLimit:
    """Keeps training within `minutes` of wall time, stopping only at epoch ends.

    Checked at every epoch end: training stops there if the next epoch, expected to
    last as long as the one just finished, would end past the deadline (or if the
    deadline has passed). So a run never overshoots by a whole epoch, and every stop
    comes with a validated checkpoint.
    """

    def __init__(self, minutes, clock=time.time):
        self._clock = clock
        self._last_check = clock()
        self.deadline = self._last_check + 60.0 * minutes if minutes else None

    def expired(self):
        now = self._clock()
        epoch_seconds, self._last_check = now - self._last_check, now
        return self.deadline is not None and now + epoch_seconds > self.deadline


def translate_split(model, tokenizer, dataset, beam_size, max_len_a=1.2, max_len_b=10):
    """Translates an evaluation dataset; returns (sources, hypotheses, references) in
    corpus order."""
    search = best_hypothesis_function(model, beam_size, max_len_a, max_len_b)
    rows = []
    for batch in dataset:
        hypotheses = tokenizer.decode(search(batch["source"])[0]).numpy()
        rows += zip(
            batch["index"].numpy(),
            batch["source_text"].numpy(),
            hypotheses,
            batch["reference_text"].numpy(),
        )
    rows.sort(key=lambda row: row[0])
    decode = [[text.decode("utf-8") for text in column] for column in list(zip(*rows))[1:]]
    return tuple(decode)


def run_training(
    data_dir,
    model_dir,
    model_config,
    training_config,
    train_dataset_kwargs,
    eval_dataset_kwargs,
    strategy_name="mirrored",
    max_train_minutes=0.0,
    test_beam_size=5,
    hparams=None,
):
    """Trains on prepared data in `data_dir`, then reports test BLEU of the best checkpoint.

    Returns:
        A dict with the training result and, if `test_beam_size`, the test scores.
    """
    prepared = PreparedData.load(data_dir)
    tokenizer = Tokenizer(prepared.sentencepiece_model_path)
    if tokenizer.vocab_size != model_config["source_vocab_size"]:
        raise ValueError(
            f"The model expects {model_config['source_vocab_size']} tokens but the "
            f"SentencePiece model in {data_dir} has {tokenizer.vocab_size}."
        )
    strategy = create_strategy(strategy_name)
    train_fn = TrainingDatasetFn(*prepared.split_paths("train"), tokenizer, **train_dataset_kwargs)
    stats = train_fn.batched().stats
    logging.info("Training data: %s", stats)
    valid = make_eval_dataset(
        *prepared.split_paths("validation"), tokenizer, **eval_dataset_kwargs
    ).dataset
    trainer = Trainer(
        lambda: ConvS2S(**model_config),
        training_config,
        model_dir,
        strategy,
        tokenizer=tokenizer,
        hparams=hparams,
    )
    trainer.write_run_config(
        {
            "model": model_config,
            "data_dir": os.path.abspath(data_dir),
            "sentencepiece_model": os.path.abspath(prepared.sentencepiece_model_path),
        }
    )
    limit = WallClockLimit(max_train_minutes)
    trainer.stop_condition = limit.expired
    start = time.time()
    result = trainer.train(train_fn, valid, steps_per_epoch=stats.batches_per_epoch)
    result["train_seconds"] = time.time() - start
    if test_beam_size and trainer.is_chief:
        result.update(
            evaluate_best(trainer, prepared, tokenizer, eval_dataset_kwargs, test_beam_size)
        )
        with tf.io.gfile.GFile(os.path.join(model_dir, "test_results.json"), "w") as f:
            json.dump(result, f, indent=2, sort_keys=True)
    return result


def evaluate_best(trainer, prepared, tokenizer, eval_dataset_kwargs, beam_size):
    """Restores the best checkpoint (else the latest) and scores the test split."""
    path = latest_checkpoint(os.path.join(trainer.model_dir, "best")) or latest_checkpoint(
        os.path.join(trainer.model_dir, "checkpoints")
    )
    restore_checkpoint(trainer.checkpoint, path)
    test = make_eval_dataset(*prepared.split_paths("test"), tokenizer, **eval_dataset_kwargs)
    _, hypotheses, references = translate_split(trainer.model, tokenizer, test.dataset, beam_size)
    scores = corpus_scores(hypotheses, references)
    message = (
        f"test BLEU {scores['bleu']:.2f} ({scores['bleu_signature']}), chrF {scores['chrf']:.2f}, "
        f"beam {beam_size}, checkpoint {path}"
    )
    print(message, flush=True)
    logging.info(message)
    return {
        "test_checkpoint": path,
        "test_beam_size": beam_size,
        **{f"test_{key}": value for key, value in scores.items()},
    }
