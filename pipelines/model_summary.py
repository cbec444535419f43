"""Prints the parameter count per component of a ConvS2S architecture.

python -m pipelines.model_summary --preset=wmt_en_de --vocab_size=40000
"""

from absl import app, flags

from convs2s_tf.models import ConvS2S, format_summary, list_presets

flags.DEFINE_enum("preset", "iwslt_de_en", list_presets(), "Architecture preset.")
flags.DEFINE_integer("source_vocab_size", 8000, "Source vocabulary size.")
flags.DEFINE_integer("target_vocab_size", 8000, "Target vocabulary size.")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    model = ConvS2S.from_preset(FLAGS.preset, FLAGS.source_vocab_size, FLAGS.target_vocab_size)
    print(f"{FLAGS.preset} ({FLAGS.source_vocab_size} -> {FLAGS.target_vocab_size} tokens)")
    print(format_summary(model))


if __name__ == "__main__":
    app.run(main)
