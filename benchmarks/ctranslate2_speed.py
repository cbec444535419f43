"""Times a CTranslate2 model as a fresh process meets it (run by
`benchmarks.compare_ctranslate2`), as `benchmarks.fresh_saved_model` times an export.

    python -m benchmarks.ctranslate2_speed --model=CT2_DIR --compute_type=int8 \\
        --sentencepiece_model=SPM --latency_input=FIRST.txt --throughput_input=SORTED.txt \\
        --output=TRANSLATIONS.txt [--batch_size=128] [--beam_size=5] [--threads=2]

In one new process: the imports, the load (`ctranslate2.Translator` on the CPU, one
translation at a time on --threads threads), every line of --latency_input one request
at a time (the first included), the same again (warm), then --throughput_input in
batches of --batch_size. A request is raw text: SentencePiece pieces in, pieces out and
detokenised, as the project's export does inside its graph. Writes the batched
translations to --output and prints one JSON line with the same keys as
`benchmarks.fresh_saved_model` and the process's peak resident memory.
"""

import time

_START = time.perf_counter()

import json  # noqa: E402

from absl import app, flags  # noqa: E402

from benchmarks.ctranslate2_text import TextTranslator  # noqa: E402
from benchmarks.fresh_saved_model import time_translator  # noqa: E402

flags.DEFINE_string("model", None, "A CTranslate2 model directory.", required=True)
flags.DEFINE_enum("compute_type", "float32", ["float32", "int8", "int8_float32"], "Its compute.")
flags.DEFINE_string("sentencepiece_model", None, "The pieces' model.", required=True)
flags.DEFINE_string("latency_input", None, "Sentences sent one at a time.", required=True)
flags.DEFINE_string("throughput_input", None, "Sentences sent in batches.", required=True)
flags.DEFINE_string("output", None, "Where the batched translations go.", required=True)
flags.DEFINE_integer("batch_size", 128, "Sentences per batched request.")
flags.DEFINE_integer("beam_size", 5, "Beam size.")
flags.DEFINE_integer("max_length", 200, "Most target pieces (fairseq's max_len_b).")
flags.DEFINE_integer("threads", 2, "Threads of the one translation at a time.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    import ctranslate2
    import sentencepiece as spm

    imported = time.perf_counter()
    translator = TextTranslator(
        ctranslate2.Translator(
            FLAGS.model,
            device="cpu",
            compute_type=FLAGS.compute_type,
            inter_threads=1,
            intra_threads=FLAGS.threads,
        ),
        spm.SentencePieceProcessor(model_file=FLAGS.sentencepiece_model),
        beam_size=FLAGS.beam_size,
        max_length=FLAGS.max_length,
        batch_size=FLAGS.batch_size,
    )
    print(json.dumps(time_translator(translator, _START, imported, time.perf_counter())))


if __name__ == "__main__":
    app.run(main)
