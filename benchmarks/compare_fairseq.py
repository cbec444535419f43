"""This project against the authors' implementation, fairseq, on the same model and machine.

    python -m benchmarks.compare_fairseq --model_dir=runs/multi30k_en_de \\
        [--data_dir=...] [--sentences=N] [--latency_sentences=100] [--skip=whole_process,...]

Exports the run to fairseq (`convs2s_tf.interop.fairseq_export`) in a temporary
directory, so both systems translate with the same weights, and times, on the test split
(test_2016_flickr for Multi30k: 1,000 sentences), with the same search (beam 5 and
fairseq's other defaults unless the flags say otherwise):

* `generate`: fairseq-generate on the split binarised by fairseq-preprocess (SentencePiece
  pieces as tokens, the exported dictionaries), batches of --batch_size and batch 1 over
  the first --latency_sentences; times by fairseq's own timer (its search calls alone);
* `in_process`: this project's translator in this process (`pipelines.translate`'s and
  `evaluate`'s, loaded with warm-up as `open_translator` does: its float32 buckets
  compiled; then one untimed request), batches of --batch_size sorted by length as
  fairseq sorts them (order restored), per --in_process_dtypes; batch 1 over the first
  --latency_sentences (float32);
* `saved_model`: `pipelines.export` with default speed flags, then a fresh process
  (`benchmarks.fresh_saved_model`): load time, batch 1 over the first --latency_sentences
  (first request included), the same again (warm), and batches of --batch_size over the
  split, first pass counted;
* `floor`: how fast any float32 search of the same model could be here, its matrix
  products alone, and those with each step's beam selection, at the rates measured on
  this CPU (`benchmarks.float32_floor`): the ratios identical translations allow at best;
* `whole_process`: wall time of `python -m pipelines.translate --model_dir=RUN` against
  fairseq-interactive (`--bpe sentencepiece`, raw text in both; its batch as translate's
  default, its buffer the whole input) on the split, and on its first sentence alone; and
  the time each takes to import its command-line module.

How many translations agree is counted (fairseq against this project, same model). The
table gives each ratio (> 1: this project is faster) and the CPU; the last line is JSON.
"""

import json
import os
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import comparison_report, fairseq_commands
from benchmarks.fresh_saved_model import translate_in_batches
from benchmarks.run_files import length_order, run_data_dir
from convs2s_tf.decoding import SearchConfig
from convs2s_tf.inference import BATCH_SIZE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ("generate", "in_process", "saved_model", "whole_process", "floor")
_DEFAULT_SEARCH = SearchConfig()

flags.DEFINE_string("model_dir", None, "Trained run to compare.", required=True)
flags.DEFINE_string("data_dir", None, "Prepared data (default: the run's data_dir).")
flags.DEFINE_string("split", "test", "Split of the prepared data to translate.")
flags.DEFINE_integer("sentences", 0, "Translate only the first N sentences (0: all).")
flags.DEFINE_integer("latency_sentences", 100, "Sentences timed one at a time.")
flags.DEFINE_integer("batch_size", 128, "Sentences per batch for throughput.")
flags.DEFINE_integer(
    "interactive_batch_size",
    BATCH_SIZE,
    "fairseq-interactive's --batch-size: pipelines.translate's default --batch_size.",
)
flags.DEFINE_integer("beam_size", _DEFAULT_SEARCH.beam_size, "Beam size of both systems.")
flags.DEFINE_float("max_len_a", _DEFAULT_SEARCH.max_len_a, "Maximum output length a * src + b.")
flags.DEFINE_integer("max_len_b", _DEFAULT_SEARCH.max_len_b, "Maximum output length a * src + b.")
flags.DEFINE_list("in_process_dtypes", ["float32", "bfloat16"], "In-process compute dtypes.")
flags.DEFINE_list("skip", [], f"Parts to leave out, of {', '.join(PARTS)}.")
flags.DEFINE_string("work_dir", None, "Keep the exports and outputs here (default: temporary).")
FLAGS = flags.FLAGS


def subprocess_env():
    """The environment of the project's pipelines run as processes."""
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")


def run_project(*arguments):
    """Runs `python ARGUMENTS...` from the repository root; returns `run_timed`'s result."""
    return fairseq_commands.run_timed([sys.executable, *arguments], ROOT, subprocess_env())


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def in_corpus_order(translations, order):
    """`translations` of the sentences `order` lists, back in corpus order."""
    restored = [None] * len(order)
    for translation, index in zip(translations, order):
        restored[index] = translation
    return restored


class Comparison:
    """The test split, the run's fairseq export, and what is measured on them.

    Attributes:
        results: Measurements by name (the JSON line's entries).
        translations: Each system's translations of the split, in corpus order.
    """

    def __init__(self, work_dir, export, sources, references, search_config):
        import sentencepiece as spm

        self.work_dir = work_dir
        self.export = export
        self.sources = sources
        self.references = references
        self.search_config = search_config
        self.batch_size = FLAGS.batch_size
        self.processor = spm.SentencePieceProcessor(model_file=export.sentencepiece_model)
        lengths = [len(pieces) for pieces in self.processor.encode(sources)]
        # Shortest first, as fairseq's ordered_indices (a stable sort by length).
        self.order = length_order(lengths)
        self.first = sources[: FLAGS.latency_sentences]
        self.results = {"sentences": len(sources), "latency_sentences": len(self.first)}
        self.translations = {}

    def path(self, name):
        return os.path.join(self.work_dir, name)

    def search_flags(self):
        """This project's flags for the compared search."""
        config = self.search_config
        return [
            f"--beam_size={config.beam_size}",
            f"--max_len_a={config.max_len_a}",
            f"--max_len_b={config.max_len_b}",
        ]

    def _write_pieces(self, name, count):
        """Writes the first `count` pairs as pieces (fairseq's tokens); returns the prefix."""
        prefix = self.path(f"pieces_{name}")
        languages = (self.export.source_lang, self.export.target_lang)
        for language, texts in zip(languages, (self.sources, self.references)):
            pieces = self.processor.encode(texts[:count], out_type=str)
            write_lines(f"{prefix}.{language}", [" ".join(line) for line in pieces])
        return prefix

    def measure_generate(self):
        """fairseq-generate at --batch_size over the split and at batch 1."""
        prefixes = [
            self._write_pieces("all", len(self.sources)),
            self._write_pieces("first", len(self.first)),
        ]
        data_bin = self.path("data_bin")
        fairseq_commands.preprocess(self.export, prefixes, data_bin, self.work_dir)
        # fairseq-preprocess names the subsets of --testpref test, test1, ...
        batched = fairseq_commands.generate(
            self.export,
            data_bin,
            "test",
            len(self.sources),
            FLAGS.batch_size,
            self.search_config,
            self.work_dir,
        )
        single = fairseq_commands.generate(
            self.export, data_bin, "test1", len(self.first), 1, self.search_config, self.work_dir
        )
        self.results.update(
            fairseq_batch_sentences_per_sec=batched.sentences_per_second,
            fairseq_batch_wall_seconds=round(batched.wall_seconds, 2),
            fairseq_batch1_ms=round(1000.0 / single.sentences_per_second, 2),
        )
        self.translations["fairseq-generate"] = batched.translations

    def measure_in_process(self):
        """This project's translator in this process, per dtype."""
        from convs2s_tf.inference import load_inference_model

        for dtype in FLAGS.in_process_dtypes:
            search_config = self.search_config.replace(dtype=dtype)
            translator = load_inference_model(
                FLAGS.model_dir, search_config=search_config
            ).translator()
            translator.translate(self.first[:1])  # untimed, as an export's warm-up
            ordered = [self.sources[index] for index in self.order]
            start = time.perf_counter()
            translations = translate_in_batches(translator, ordered, FLAGS.batch_size)
            seconds = time.perf_counter() - start
            self.results[f"in_process_{dtype}_batch_sentences_per_sec"] = round(
                len(ordered) / seconds, 2
            )
            self.translations[f"in-process {dtype}"] = in_corpus_order(translations, self.order)
            if dtype == "float32":
                start = time.perf_counter()
                for sentence in self.first:
                    translator.translate([sentence])
                milliseconds = 1000.0 * (time.perf_counter() - start) / len(self.first)
                self.results["in_process_float32_batch1_ms"] = round(milliseconds, 2)

    def measure_saved_model(self):
        """`pipelines.export` with default speed flags, timed in a fresh process."""
        export_dir = self.path("saved_model")
        seconds, _, _ = run_project(
            "-m",
            "pipelines.export",
            f"--model_dir={FLAGS.model_dir}",
            f"--export_dir={export_dir}",
            *self.search_flags(),
        )
        output = self.path("saved_model_translations.txt")
        _, stdout, _ = run_project(
            "-m",
            "benchmarks.fresh_saved_model",
            f"--saved_model={export_dir}",
            f"--latency_input={write_lines(self.path('first.txt'), self.first)}",
            f"--throughput_input="
            f"{write_lines(self.path('sorted.txt'), [self.sources[i] for i in self.order])}",
            f"--output={output}",
            f"--batch_size={FLAGS.batch_size}",
        )
        timings = json.loads(stdout.strip().splitlines()[-1])
        self.results["saved_model_export_seconds"] = round(seconds, 2)
        self.results.update({f"saved_model_{key}": value for key, value in timings.items()})
        self.translations["fresh SavedModel"] = in_corpus_order(read_lines(output), self.order)

    def measure_floor(self):
        """The float32 floors: the model's matrix products, alone and with the beam selection
        (`benchmarks.float32_floor`)."""
        from benchmarks.float32_floor import floors
        from convs2s_tf.runs import load_trained_model

        model, tokenizer = load_trained_model(FLAGS.model_dir)[:2]
        self.results.update(
            floors(
                model,
                tokenizer,
                self.sources,
                len(self.first),
                FLAGS.batch_size,
                self.search_config,
            )
        )

    def measure_whole_process(self):
        """pipelines.translate against fairseq-interactive, as whole processes."""
        inputs = {
            "all": write_lines(self.path("source.txt"), self.sources),
            "one": write_lines(self.path("one.txt"), self.sources[:1]),
        }
        for name, path in inputs.items():
            count = len(read_lines(path))
            output = self.path(f"translate_{name}.txt")
            seconds, _, _ = run_project(
                "-m",
                "pipelines.translate",
                f"--model_dir={FLAGS.model_dir}",
                f"--input={path}",
                f"--output={output}",
                *self.search_flags(),
            )
            self.results[f"translate_{name}_seconds"] = round(seconds, 2)
            fairseq_seconds, fairseq_translations = fairseq_commands.interactive(
                self.export,
                path,
                count,
                FLAGS.interactive_batch_size,
                self.search_config,
                self.work_dir,
            )
            self.results[f"interactive_{name}_seconds"] = round(fairseq_seconds, 2)
            if name == "all":
                self.translations["pipelines.translate"] = read_lines(output)
                self.translations["fairseq-interactive"] = fairseq_translations
        self.measure_imports()

    def measure_imports(self):
        """The time each command line takes to import its module (Python's start-up
        included), and whether TensorFlow came with it (fairseq imports
        torch.utils.tensorboard, which imports TensorFlow where it is installed)."""
        for name, module in (
            ("translate", "pipelines.translate"),
            ("interactive", "fairseq_cli.interactive"),
        ):
            seconds, stdout, _ = run_project(
                "-c", f"import sys, {module}; print('tensorflow' in sys.modules)"
            )
            self.results[f"import_{name}_seconds"] = round(seconds, 2)
            self.results[f"import_{name}_loads_tensorflow"] = stdout.strip() == "True"


def read_split():
    """The source and reference lines of --split, limited to --sentences."""
    from convs2s_tf.data.data_directory import PreparedData

    try:
        data_dir = FLAGS.data_dir or run_data_dir(FLAGS.model_dir)
    except ValueError as error:
        raise app.UsageError(f"{error}: give --data_dir.")
    source_path, reference_path = PreparedData.load(data_dir).split_paths(FLAGS.split)
    limit = FLAGS.sentences or None
    return read_lines(source_path)[:limit], read_lines(reference_path)[:limit]


def main(argv):
    del argv
    from convs2s_tf.interop.fairseq_export import export_run

    unknown = sorted(set(FLAGS.skip) - set(PARTS))
    if unknown:
        raise app.UsageError(f"Unknown --skip parts {unknown}; known: {', '.join(PARTS)}.")
    search_config = SearchConfig(
        beam_size=FLAGS.beam_size, max_len_a=FLAGS.max_len_a, max_len_b=FLAGS.max_len_b
    ).validate()
    sources, references = read_split()
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = FLAGS.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        export = export_run(FLAGS.model_dir, os.path.join(work_dir, "fairseq"))
        comparison = Comparison(work_dir, export, sources, references, search_config)
        print(comparison_report.header(FLAGS.model_dir, export, comparison), flush=True)
        for part in PARTS:
            if part not in FLAGS.skip:
                getattr(comparison, f"measure_{part}")()
                print(f"{part}: done", flush=True)
    print(comparison_report.table(comparison))
    print(json.dumps(comparison_report.summary(comparison)))


if __name__ == "__main__":
    app.run(main)
