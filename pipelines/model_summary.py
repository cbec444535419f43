"""Prints the parameter count per component of the ConvS2S architecture the flags describe.

    python -m pipelines.model_summary --preset=wmt_en_de --vocab_size=40000
    python -m pipelines.model_summary --flagfile=configs/wmt14_en_de.cfg

The model flags as pipelines.train reads them: --preset and its
overrides, the joint vocabulary --vocab_size and the position tables.
"""

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(pipeline_flags.MODEL, also=("vocab_size",))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    from convs2s_tf.models.families import build_model, family_of

    try:
        config = pipeline_flags.model_config_from_flags(FLAGS.vocab_size)
    except flags.ValidationError as error:
        raise app.UsageError(str(error)) from None
    print(f"{FLAGS.preset} ({FLAGS.vocab_size} -> {FLAGS.vocab_size} tokens)")
    print(family_of(config).format_summary(build_model(config)))
    return 0


if __name__ == "__main__":
    cli.run(main)
