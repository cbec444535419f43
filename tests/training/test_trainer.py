"""Tests of the training loop: compiled steps, accumulation, stopping, the run config."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.synthetic import EpochBatches, dataset, make_trainer

from convs2s_tf.runs import latest_checkpoint


@pytest.mark.slow  # over ten seconds on 2 cores
def test_xla_compiled_step_makes_the_same_update(tmp_path):
    batches = list(dataset(seed=5, batches=2))
    weights = {}
    for jit in (False, True):
        trainer = make_trainer(tmp_path / str(jit), xla=jit)
        distributed = trainer.strategy.experimental_distribute_dataset(
            tf.data.Dataset.from_tensors(batches[0])
        )
        trainer._build_steps(distributed.element_spec)
        for batch in distributed:
            result = trainer._train_step(batch)
        assert bool(result["applied"])
        weights[jit] = [w.numpy() for w in trainer.model.trainable_weights]
    for plain, compiled in zip(weights[False], weights[True]):
        np.testing.assert_allclose(compiled, plain, atol=1e-5)


def test_update_freq_accumulates(tmp_path):
    trainer = make_trainer(tmp_path, update_freq=3, max_epochs=1, save_every_steps=0)
    result = trainer.train(EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=7)))
    # 7 micro-batches with update_freq 3: two full updates and one for the remainder.
    assert result["step"] == 3
    assert int(trainer.optimizer.iterations.numpy()) == 3


@pytest.mark.slow  # over ten seconds on 2 cores
def test_stop_inside_an_epoch_validates_and_checkpoints(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=2, save_every_steps=0, valid_beam_size=0)
    result = trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=5), steps_per_epoch=5),
        valid_dataset=dataset(seed=99, batches=1),
    )
    assert result["stop_reason"] == "reached max_steps" and "valid_loss" in result
    assert latest_checkpoint(str(tmp_path / "checkpoints")).endswith("ckpt-2")
    assert latest_checkpoint(str(tmp_path / "best")).endswith("ckpt-2")
    # The epoch stays open: a resumed run finishes it.
    assert int(trainer.state.epoch.numpy()) == 0 and int(trainer.state.epoch_batches.numpy()) == 2
    tags = set()
    for path in tf.io.gfile.glob(str(tmp_path / "valid" / "*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags |= {(value.tag, event.step) for value in event.summary.value}
    assert {("loss", 2), ("perplexity", 2)} <= tags


def test_resume_guard_compares_data_and_vocabulary(tmp_path):
    trainer = make_trainer(tmp_path)
    run_config = {"model": {"a": 1}, "data_fingerprint": "f1", "vocabulary_sha256": "v1"}
    trainer.write_run_config(run_config)
    trainer.write_run_config(dict(run_config))  # the same run resumes
    with pytest.raises(ValueError, match="other prepared data"):
        trainer.write_run_config({**run_config, "data_fingerprint": "f2"})
    with pytest.raises(ValueError, match="SentencePiece vocabulary"):
        trainer.write_run_config({**run_config, "vocabulary_sha256": "v2"})
