"""Tests of the training loop: losses, distribution, NaN handling, LR plateau, checkpoints."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers.synthetic import dataset, model_fn

from convs2s_tf.training import (
    CheckpointError,
    Trainer,
    TrainingConfig,
    TrainingDivergedError,
    create_strategy,
    latest_checkpoint,
    token_losses,
)
from convs2s_tf.training.losses import (
    TOKEN_BUCKET,
    bucketed_token_count,
    flat_token_losses,
    fused_token_losses,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _subprocess_env(**extra):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **extra)
    return env


def test_token_losses_match_reference(rng):
    logits = rng.normal(size=[2, 3, 7]).astype("float32")
    targets = np.array([[4, 5, 2], [6, 2, 1]], "int32")
    loss_sum, nll_sum, tokens = token_losses(logits, targets, label_smoothing=0.1)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    mask = targets != 1
    nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    smooth = -log_probs.sum(-1)
    eps_i = 0.1 / 6
    expected = ((1 - 0.1 - eps_i) * nll + eps_i * smooth)[mask].sum()
    assert float(tokens) == 5.0
    assert float(nll_sum) == pytest.approx(nll[mask].sum(), rel=1e-5)
    assert float(loss_sum) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_token_losses_match_flat_token_losses(rng, dtype):
    """The XLA loss (bias added inside, padding rows weighed 0) and its gradients equal
    the graph-mode loss of `logits + bias`."""
    rows, vocab = 70, 53
    logits = tf.cast(rng.normal(size=[rows, vocab]).astype("float32") * 3, dtype)
    bias = tf.constant(rng.normal(size=[vocab]).astype("float32"))
    targets = tf.constant(rng.integers(0, vocab, size=[rows]).astype("int32"))
    real = 61  # rows 61..69 are bucket padding
    weights = tf.sequence_mask(real, rows, tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([logits, bias])
        loss_sum, nll_sum = fused_token_losses(logits, bias, targets, weights, 0.1)
        full = tf.cast(logits, tf.float32) + bias
        expected_loss, expected_nll, _ = flat_token_losses(full[:real], targets[:real], 0.1)
    tolerance = 1e-5 if dtype == "float32" else 1e-4
    assert float(loss_sum) == pytest.approx(float(expected_loss), rel=tolerance)
    assert float(nll_sum) == pytest.approx(float(expected_nll), rel=tolerance)
    logits_gradient, bias_gradient = tape.gradient(loss_sum, [logits, bias])
    expected_logits_gradient, expected_bias_gradient = tape.gradient(expected_loss, [logits, bias])
    assert logits_gradient.dtype == logits.dtype
    np.testing.assert_allclose(
        tf.cast(logits_gradient, tf.float32),
        tf.cast(expected_logits_gradient, tf.float32),
        atol=1e-6 if dtype == "float32" else 4e-3,
    )
    np.testing.assert_array_equal(logits_gradient[real:], 0)  # padding rows: no gradient
    np.testing.assert_allclose(bias_gradient, expected_bias_gradient, atol=1e-5)
    assert bucketed_token_count(tf.constant(0)) == 0
    assert bucketed_token_count(tf.constant(1)) == TOKEN_BUCKET
    assert bucketed_token_count(tf.constant(TOKEN_BUCKET + 1)) == 2 * TOKEN_BUCKET


def test_mirrored_update_equals_single_device():
    """One update under a 2-logical-CPU MirroredStrategy equals the single-device one."""
    output = subprocess.run(
        [sys.executable, "-m", "tests.helpers.mirrored_update"],
        cwd=ROOT,
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert output.returncode == 0, output.stderr[-3000:]
    result = json.loads(output.stdout.strip().splitlines()[-1])
    assert result["moved"] > 1e-3  # the update really changed the weights
    assert result["differences"]["uneven"] < 1e-5
    assert result["differences"]["empty_replica"] < 1e-5


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_multi_worker_training_ends_with_identical_weights(tmp_path):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.helpers.multi_worker_train",
                    str(tmp_path / "run"),
                    str(tmp_path / f"weights_{index}.npz"),
                ],
                cwd=ROOT,
                env=_subprocess_env(TF_CONFIG=tf_config),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr[-3000:]
            outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for process in processes:
            process.kill()
    assert [o["step"] for o in outputs] == [4, 4]
    first = np.load(tmp_path / "weights_0.npz")
    second = np.load(tmp_path / "weights_1.npz")
    assert len(first.files) == len(second.files) > 10
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
    # Only the chief wrote checkpoints and events into the run directory.
    assert latest_checkpoint(str(tmp_path / "run" / "checkpoints")).endswith("ckpt-4")
    assert not any(name.startswith("tmp_worker") for name in os.listdir(tmp_path / "run"))


def _trainer(tmp_path, **config):
    config.setdefault("progress_bar", False)
    return Trainer(model_fn, TrainingConfig(**config), str(tmp_path), create_strategy("one_device"))


def test_nonfinite_loss_skips_update_then_stops(tmp_path):
    trainer = _trainer(tmp_path, max_nonfinite_steps=3, max_steps=10, save_every_steps=0)
    gain = trainer.model.decoder.output_projection.kernel_g
    gain.assign(tf.fill(gain.shape, float("nan")))
    before = [w.numpy() for w in trainer.model.trainable_weights]
    with pytest.raises(TrainingDivergedError, match="3 consecutive updates"):
        trainer.train(lambda epoch, context: dataset(seed=epoch, batches=5))
    after = [w.numpy() for w in trainer.model.trainable_weights]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    assert int(trainer.state.step.numpy()) == 3


def test_xla_compiled_step_makes_the_same_update(tmp_path):
    batches = list(dataset(seed=5, batches=2))
    weights = {}
    for jit in (False, True):
        trainer = _trainer(tmp_path / str(jit), jit_compile=jit)
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
    trainer = _trainer(tmp_path, update_freq=3, max_epochs=1, save_every_steps=0)
    result = trainer.train(lambda epoch, context: dataset(seed=epoch, batches=7))
    # 7 micro-batches with update_freq 3: two full updates and one for the remainder.
    assert result["step"] == 3
    assert int(trainer.optimizer.iterations.numpy()) == 3


def test_learning_rate_shrinks_on_plateau_and_stops(tmp_path):
    trainer = _trainer(
        tmp_path,
        learning_rate=0.25,
        min_learning_rate=0.002,
        save_every_steps=0,
        valid_beam_size=0,
    )
    result = trainer.train(
        lambda epoch, context: dataset(seed=epoch, batches=2, sentences=3),
        valid_dataset=dataset(seed=99, batches=1),
    )
    # Validation perplexity can only improve for a while; each epoch without improvement
    # divides the rate by 10 until it is below the floor: 0.25 -> 0.025 -> 0.0025 -> stop.
    assert result["stop_reason"].startswith("learning rate reached the floor")
    assert result["learning_rate"] == pytest.approx(0.00025, rel=1e-5)
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(0.00025, rel=1e-5)
    assert os.path.exists(tmp_path / "best" / "checkpoint")


def test_step_after_a_shrink_moves_by_the_new_rate(tmp_path):
    trainer = _trainer(tmp_path, max_epochs=1, save_every_steps=0, clip_norm=0.0)
    trainer.train(lambda epoch, context: dataset(seed=epoch, batches=3))
    # An epoch end without improvement: 0.25 -> 0.025.
    trainer.schedule.best.assign(0.0)
    trainer._anneal(5.0)
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(0.025)
    trainer.save()
    weights = [w.numpy() for w in trainer.model.trainable_variables]
    velocity = [m.numpy() for m in trainer.optimizer.momentums]
    trainer.config.max_epochs, trainer.config.max_steps = 2, int(trainer.state.step.numpy()) + 1
    trainer.train(lambda epoch, context: dataset(seed=epoch, batches=3))
    momentum, ratio = 0.99, 0.1
    for w0, m0, variable, slot in zip(
        weights, velocity, trainer.model.trainable_variables, trainer.optimizer.momentums
    ):
        m1, w1 = slot.numpy(), variable.numpy()
        # fairseq's NAG: m1 = momentum * ratio * m0 - lr * g and w1 = w0 + momentum * m1 -
        # lr * g, so w1 - w0 = (1 + momentum) * m1 - momentum * ratio * m0. Without the
        # rescaling the old velocity m0 would enter unscaled.
        expected = (1 + momentum) * m1 - momentum * ratio * m0
        np.testing.assert_allclose(w1 - w0, expected, atol=1e-6)
        if abs(m0).max() > 1e-3:
            assert abs((1 + momentum) * m1 - momentum * m0 - (w1 - w0)).max() > 1e-4


def test_stop_inside_an_epoch_validates_and_checkpoints(tmp_path):
    trainer = _trainer(tmp_path, max_steps=2, save_every_steps=0, valid_beam_size=0)
    result = trainer.train(
        lambda epoch, context: dataset(seed=epoch, batches=5),
        valid_dataset=dataset(seed=99, batches=1),
        steps_per_epoch=5,
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


def test_resume_from_best_when_checkpoints_are_gone(tmp_path):
    import shutil

    trainer = _trainer(tmp_path, max_epochs=1, save_every_steps=0, valid_beam_size=0)
    trainer.train(
        lambda epoch, context: dataset(seed=epoch, batches=3),
        valid_dataset=dataset(seed=99, batches=1),
    )
    best = latest_checkpoint(str(tmp_path / "best"))
    shutil.rmtree(tmp_path / "checkpoints")
    resumed = _trainer(tmp_path, max_epochs=2, save_every_steps=0, valid_beam_size=0)
    assert resumed.restore_or_initialize() == best
    assert int(resumed.state.step.numpy()) == 3 and int(resumed.state.epoch.numpy()) == 1
    assert float(resumed.state.best_valid_loss.numpy()) < float("inf")


def test_resume_guard_compares_data_and_vocabulary(tmp_path):
    trainer = _trainer(tmp_path)
    run_config = {"model": {"a": 1}, "data_fingerprint": "f1", "vocabulary_sha256": "v1"}
    trainer.write_run_config(run_config)
    trainer.write_run_config(dict(run_config))  # the same run resumes
    with pytest.raises(ValueError, match="other prepared data"):
        trainer.write_run_config({**run_config, "data_fingerprint": "f2"})
    with pytest.raises(ValueError, match="SentencePiece vocabulary"):
        trainer.write_run_config({**run_config, "vocabulary_sha256": "v2"})


def test_checkpoint_from_before_the_schedule_restores(tmp_path):
    import keras

    trainer = _trainer(tmp_path, max_steps=2, save_every_steps=2)
    trainer.train(lambda epoch, context: dataset(seed=epoch, batches=3))
    # A checkpoint as written before the plateau schedule and the optimiser's previous
    # rate existed: Keras' own SGD, no schedule.
    old_optimizer = keras.optimizers.SGD(learning_rate=0.025, momentum=0.99, nesterov=True)
    old_optimizer.build(trainer.model.trainable_variables)
    trainer.state.learning_rate.assign(0.025)
    legacy = tf.train.Checkpoint(model=trainer.model, optimizer=old_optimizer, state=trainer.state)
    path = legacy.save(str(tmp_path / "legacy" / "ckpt"))
    weights = [w.numpy() for w in trainer.model.weights]
    resumed = _trainer(tmp_path)
    resumed._restore(path)
    for a, b in zip(weights, resumed.model.weights):
        np.testing.assert_array_equal(a, b.numpy())
    assert float(resumed.optimizer.previous_learning_rate.numpy()) == pytest.approx(0.025)


def test_resume_restores_state_and_optimizer(tmp_path, monkeypatch):
    # A relative model directory, as in the configs.
    monkeypatch.chdir(tmp_path)
    tmp_path = tmp_path.relative_to(tmp_path) / "run"
    trainer = _trainer(tmp_path, max_steps=4, save_every_steps=2)
    trainer.train(lambda epoch, context: dataset(seed=epoch, batches=3), steps_per_epoch=3)
    weights = [w.numpy() for w in trainer.model.weights]
    momentum = [v.numpy() for v in trainer.optimizer.variables]
    resumed = _trainer(tmp_path, max_steps=4, save_every_steps=2)
    assert resumed.restore_or_initialize() is not None
    assert int(resumed.state.step.numpy()) == 4
    assert int(resumed.state.epoch.numpy()) == 1 and int(resumed.state.epoch_batches.numpy()) == 1
    for a, b in zip(weights, resumed.model.weights):
        np.testing.assert_array_equal(a, b.numpy())
    for a, b in zip(momentum, resumed.optimizer.variables):
        np.testing.assert_array_equal(a, b.numpy())


def test_corrupt_or_missing_checkpoint_is_an_error(tmp_path):
    trainer = _trainer(tmp_path, max_steps=2, save_every_steps=2)
    trainer.train(lambda epoch, context: dataset(seed=epoch, batches=3))
    directory = tmp_path / "checkpoints"
    data_file = next(p for p in directory.iterdir() if p.name.startswith("ckpt-2.data"))
    data_file.write_bytes(b"\0garbage" * 10)
    with pytest.raises(CheckpointError, match="cannot be restored"):
        _trainer(tmp_path).restore_or_initialize()
    for path in directory.iterdir():
        if path.name.startswith("ckpt-2"):
            path.unlink()
    with pytest.raises(CheckpointError, match="is missing; refusing to start afresh"):
        _trainer(tmp_path).restore_or_initialize()
    (directory / "checkpoint").unlink()
    (directory / "ckpt-9.index").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no 'checkpoint' state file"):
        _trainer(tmp_path).restore_or_initialize()


def test_config_validation():
    with pytest.raises(ValueError, match="min_learning_rate=0.5 must be below"):
        TrainingConfig(min_learning_rate=0.5).validate()
    with pytest.raises(ValueError, match="update_freq"):
        TrainingConfig(update_freq=0).validate()
    with pytest.raises(ValueError, match="Unknown strategy 'tpu'"):
        create_strategy("tpu")


def test_fused_loss_gradient_matches_autodiff(rng):
    logits = tf.constant(rng.normal(size=[6, 9]).astype("float32"))
    targets = tf.constant([4, 5, 2, 6, 1, 8])
    weights = tf.constant(rng.normal(size=[]).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss, _, _ = token_losses(logits, targets, label_smoothing=0.2)
        loss = loss * weights
    fused = tf.convert_to_tensor(tape.gradient(loss, logits)).numpy()
    with tf.GradientTape() as tape:
        tape.watch(logits)
        log_probs = tf.nn.log_softmax(logits)
        mask = tf.cast(targets != 1, tf.float32)
        nll = -tf.gather(log_probs, tf.where(targets == 1, 0, targets), batch_dims=1)
        eps_i = 0.2 / 8
        per_token = (1 - 0.2 - eps_i) * nll - eps_i * tf.reduce_sum(log_probs, -1)
        reference = tf.reduce_sum(per_token * mask) * weights
    np.testing.assert_allclose(fused, tape.gradient(reference, logits).numpy(), atol=1e-6)
    assert float(loss) == pytest.approx(float(reference), rel=1e-5)


def test_wall_clock_limit_stops_before_an_epoch_would_overrun():
    from convs2s_tf.training.run import WallClockLimit

    now = [0.0]
    limit = WallClockLimit(10, clock=lambda: now[0])  # 600 s
    checks = []
    for epoch_end in (170.0, 340.0, 510.0):  # epochs of 170 s
        now[0] = epoch_end
        checks.append(limit.expired())
    # After 340 s another 170 s epoch still fits (510 <= 600); after 510 s it would not.
    assert checks == [False, False, True]
    assert not WallClockLimit(0, clock=lambda: now[0]).expired()


@pytest.mark.parametrize("nesterov", [True, False])
def test_fused_sgd_matches_keras_sgd(rng, nesterov):
    import keras

    from convs2s_tf.training.fused_sgd import FusedSGD

    initial = [rng.normal(size=[3, 4]).astype("float32"), rng.normal(size=[5]).astype("float32")]
    reference = [keras.Variable(v) for v in initial]
    fused = [keras.Variable(v) for v in initial]
    reference_optimizer = keras.optimizers.SGD(0.25, momentum=0.99, nesterov=nesterov)
    fused_optimizer = FusedSGD(learning_rate=0.25, momentum=0.99, nesterov=nesterov)
    for _ in range(4):
        gradients = [tf.constant(rng.normal(size=v.shape).astype("float32")) for v in initial]
        reference_optimizer.apply(gradients, reference)
        fused_optimizer.apply(gradients, fused)
    for expected, actual in zip(
        reference + reference_optimizer.variables, fused + fused_optimizer.variables
    ):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    assert abs(fused[0].numpy() - initial[0]).max() > 1e-2  # the variables did move
