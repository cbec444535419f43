"""Trains a ConvS2S translator.

    python -m pipelines.train --flagfile=configs/multi30k_en_de.cfg [--model_dir=...]

Prepares the data first if needed (a no-op when it is up to date; with several workers
on one filesystem, one prepares and the others wait), trains until the learning rate
falls below --min_learning_rate (or --max_epochs/--max_steps/--max_train_minutes), then
translates the test split with the best checkpoint and reports BLEU. Re-running the same
command resumes from the last checkpoint, with the time budget left (a finished run
trains nothing more). SIGTERM saves at the next step (or abandons validation or the test
translation) and exits with status 143, which a scheduler's restart turns into a
resumed run. Watch it with
`tensorboard --logdir=MODEL_DIR`.
"""

from absl import app, flags, logging

from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(
    pipeline_flags.DATA,
    pipeline_flags.BATCHING,
    pipeline_flags.MODEL,
    pipeline_flags.RUN,
    pipeline_flags.TRAINING,
)


def _check_local_splits(split_prefixes):
    """A local corpus names the splits training reads before anything is prepared: the
    validation split (every epoch) and, unless --test_beam_size=0, the test split."""
    if split_prefixes is None:
        return
    if "validation" not in split_prefixes:
        raise app.UsageError("--valid_prefix is required: training validates on it every epoch.")
    if FLAGS.test_beam_size and "test" not in split_prefixes:
        raise app.UsageError(
            "--test_prefix is required unless --test_beam_size=0 (no test translation)."
        )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise app.UsageError("--model_dir is required.")
    from convs2s_tf.data.prepare import prepare_data
    from convs2s_tf.training.coordination import PREEMPTED_EXIT_STATUS
    from convs2s_tf.training.run import run_training
    from convs2s_tf.training.strategies import create_strategy
    from convs2s_tf.training.trainer import PREEMPTED

    # First: a multi-worker strategy (and CPU replicas) must be set up before TensorFlow
    # runs anything, which preparing the data may do.
    strategy = create_strategy(FLAGS.strategy, FLAGS.cpu_replicas)

    # Invalid flags (flags.ValidationError), corpus problems, unusable checkpoints and a
    # diverged run are reported by pipelines.cli in one line.
    training_config = pipeline_flags.training_config_from_flags()
    prepare_config = pipeline_flags.prepare_config_from_flags()
    _check_local_splits(prepare_config.split_prefixes if FLAGS.dataset == "local" else None)
    prepared = prepare_data(prepare_config)
    if not prepared.reused:
        print(f"Prepared {FLAGS.data_dir}.", flush=True)
    model_config = pipeline_flags.model_config_from_flags(prepared.summary["vocab_size"])
    hparams = {
        **{k: v for k, v in model_config.items() if k != "decoder_attention"},
        **{k: v for k, v in vars(training_config).items()},
        "max_tokens": FLAGS.max_tokens,
        "preset": FLAGS.preset,
        "max_train_minutes": FLAGS.max_train_minutes,
        "anneal_final_minutes": FLAGS.anneal_final_minutes,
    }
    try:
        result = run_training(
            FLAGS.data_dir,
            FLAGS.model_dir,
            model_config,
            training_config,
            pipeline_flags.training_dataset_kwargs(seed=FLAGS.seed),
            pipeline_flags.eval_dataset_kwargs(),
            strategy=strategy,
            max_train_minutes=FLAGS.max_train_minutes,
            anneal_final_minutes=FLAGS.anneal_final_minutes,
            test_beam_size=FLAGS.test_beam_size,
            hparams=hparams,
        )
    except ValueError as error:
        # A run directory of another model or vocabulary than the flags describe.
        raise app.UsageError(str(error)) from error
    logging.info("Done: %s", result)
    if result["stop_reason"] == PREEMPTED:
        print(
            f"Stopped by SIGTERM at step {result['step']} after saving; the same command "
            f"resumes (exit status {PREEMPTED_EXIT_STATUS}).",
            flush=True,
        )
        return PREEMPTED_EXIT_STATUS
    return 0


if __name__ == "__main__":
    cli.run(main)
