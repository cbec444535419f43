"""Trains a ConvS2S translator.

    python -m pipelines.train --flagfile=configs/multi30k_en_de.cfg [--model_dir=...]

Prepares the data first if needed (a no-op when it is up to date), trains until the
learning rate falls below --min_learning_rate (or --max_epochs/--max_steps/
--max_train_minutes), then translates the test split with the best checkpoint and
reports BLEU. Re-running the same command resumes from the last checkpoint. Watch it
with `tensorboard --logdir=MODEL_DIR`.
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


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise app.UsageError("--model_dir is required.")
    from convs2s_tf.data.prepare import prepare_data
    from convs2s_tf.training.run import run_training

    # Invalid flags (flags.ValidationError), corpus problems, unusable checkpoints and a
    # diverged run are reported by pipelines.cli in one line.
    training_config = pipeline_flags.training_config_from_flags()
    prepared = prepare_data(pipeline_flags.prepare_config_from_flags())
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
            strategy_name=FLAGS.strategy,
            max_train_minutes=FLAGS.max_train_minutes,
            anneal_final_minutes=FLAGS.anneal_final_minutes,
            test_beam_size=FLAGS.test_beam_size,
            hparams=hparams,
        )
    except ValueError as error:
        # A run directory of another model or vocabulary than the flags describe.
        raise app.UsageError(str(error)) from error
    logging.info("Done: %s", result)
    return 0


if __name__ == "__main__":
    cli.run(main)
