"""This project against the authors' implementation, fairseq, on the same model and machine.

    python -m benchmarks.compare.fairseq --model_dir=runs/multi30k_en_de \\
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
  (`benchmarks.translate_speed`'s): load time, batch 1 over the first --latency_sentences
  (first request included), the same again (warm), and batches of --batch_size over the
  split, first pass counted;
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

from benchmarks import (
    ROOT,
    child_env,
    in_corpus_order,
    last_json,
    length_order,
    read_lines,
    run_timed,
    translate_in_batches,
    write_lines,
)
from benchmarks.compare import fairseq_tools
from benchmarks.translate_speed import child_command

PARTS = ("generate", "in_process", "saved_model", "whole_process")


def define_flags(flag_values=flags.FLAGS):
    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.inference import BATCH_SIZE

    define, search = {"flag_values": flag_values}, SearchConfig()
    flags.DEFINE_string("model_dir", None, "Trained run to compare.", required=True, **define)
    flags.DEFINE_string("data_dir", None, "Prepared data (default: the run's).", **define)
    flags.DEFINE_string("split", "test", "Split of the prepared data to translate.", **define)
    flags.DEFINE_integer("sentences", 0, "Translate only the first N sentences (0: all).", **define)
    flags.DEFINE_integer("latency_sentences", 100, "Sentences timed one at a time.", **define)
    flags.DEFINE_integer("batch_size", 128, "Sentences per batch for throughput.", **define)
    flags.DEFINE_integer(
        "interactive_batch_size",
        BATCH_SIZE,
        "fairseq-interactive's --batch-size: pipelines.translate's default --batch_size.",
        **define,
    )
    flags.DEFINE_integer("beam_size", search.beam_size, "Beam size of both systems.", **define)
    flags.DEFINE_float("max_len_a", search.max_len_a, "Maximum length a * src + b.", **define)
    flags.DEFINE_integer("max_len_b", search.max_len_b, "Maximum length a * src + b.", **define)
    dtypes = ["float32", "bfloat16"]
    flags.DEFINE_list("in_process_dtypes", dtypes, "In-process compute dtypes.", **define)
    flags.DEFINE_list("skip", [], f"Parts to leave out, of {', '.join(PARTS)}.", **define)
    flags.DEFINE_string(
        "work_dir", None, "Keep exports and outputs here (default: temporary).", **define
    )


def run_project(*arguments):
    """Runs `python ARGUMENTS...` from the repository root; returns `run_timed`'s result."""
    return run_timed([sys.executable, *arguments], ROOT, child_env())


class Comparison:
    """The test split, the run's fairseq export, and what is measured on them.

    Attributes:
        results: Measurements by name (the JSON line's entries).
        translations: Each system's translations of the split, in corpus order.
    """

    def __init__(self, options, work_dir, export, sources, references, search_config):
        import sentencepiece as spm

        self.options = options
        self.work_dir = work_dir
        self.export = export
        self.sources = sources
        self.references = references
        self.search_config = search_config
        self.batch_size = self.options.batch_size
        self.processor = spm.SentencePieceProcessor(model_file=export.sentencepiece_model)
        lengths = [len(pieces) for pieces in self.processor.encode(sources)]
        # Shortest first, as fairseq's ordered_indices (a stable sort by length).
        self.order = length_order(lengths)
        self.first = sources[: self.options.latency_sentences]
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
        fairseq_tools.preprocess(self.export, prefixes, data_bin, self.work_dir)
        # fairseq-preprocess names the subsets of --testpref test, test1, ...
        batched = fairseq_tools.generate(
            self.export,
            data_bin,
            "test",
            len(self.sources),
            self.options.batch_size,
            self.search_config,
            self.work_dir,
        )
        single = fairseq_tools.generate(
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

        for dtype in self.options.in_process_dtypes:
            search_config = self.search_config.replace(dtype=dtype)
            translator = load_inference_model(
                self.options.model_dir, search_config=search_config
            ).translator()
            translator.translate(self.first[:1])  # untimed, as an export's warm-up
            ordered = [self.sources[index] for index in self.order]
            start = time.perf_counter()
            translations = translate_in_batches(translator, ordered, self.options.batch_size)
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
            f"--model_dir={self.options.model_dir}",
            f"--export_dir={export_dir}",
            *self.search_flags(),
        )
        output = self.path("saved_model_translations.txt")
        first = write_lines(self.path("first.txt"), self.first)
        ordered = write_lines(self.path("sorted.txt"), [self.sources[i] for i in self.order])
        command = child_command(export_dir, first, ordered, output, self.options.batch_size)
        timings = last_json(run_timed(command)[1])
        self.results["saved_model_export_seconds"] = round(seconds, 2)
        self.results.update({f"saved_model_{key}": value for key, value in timings.items()})
        self.translations["fresh SavedModel"] = in_corpus_order(read_lines(output), self.order)

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
                f"--model_dir={self.options.model_dir}",
                f"--input={path}",
                f"--output={output}",
                *self.search_flags(),
            )
            self.results[f"translate_{name}_seconds"] = round(seconds, 2)
            fairseq_seconds, fairseq_translations = fairseq_tools.interactive(
                self.export,
                path,
                count,
                self.options.interactive_batch_size,
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


def read_split(options):
    """The source and reference lines of --split, limited to --sentences."""
    from convs2s_tf.data.data_directory import PreparedData
    from convs2s_tf.runs import RunDirectory

    run = RunDirectory(options.model_dir)
    data_dir = options.data_dir or run.data_dir(run.read_config())
    if not data_dir:
        raise app.UsageError(f"{options.model_dir} names no data_dir: give --data_dir.")
    source_path, reference_path = PreparedData.load(data_dir).split_paths(options.split)
    limit = options.sentences or None
    return read_lines(source_path)[:limit], read_lines(reference_path)[:limit]


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.interop.fairseq_export import export_run

    unknown = sorted(set(options.skip) - set(PARTS))
    if unknown:
        raise app.UsageError(f"Unknown --skip parts {unknown}; known: {', '.join(PARTS)}.")
    search_config = SearchConfig(
        beam_size=options.beam_size, max_len_a=options.max_len_a, max_len_b=options.max_len_b
    ).validate()
    sources, references = read_split(options)
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = options.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        export = export_run(options.model_dir, os.path.join(work_dir, "fairseq"))
        comparison = Comparison(options, work_dir, export, sources, references, search_config)
        print(fairseq_tools.header(options.model_dir, export, comparison), flush=True)
        for part in PARTS:
            if part not in options.skip:
                getattr(comparison, f"measure_{part}")()
                print(f"{part}: done", flush=True)
    print(fairseq_tools.table(comparison))
    print(json.dumps(fairseq_tools.summary(comparison)))


def main(argv):
    del argv
    run(flags.FLAGS)


if __name__ == "__main__":
    define_flags()
    app.run(main)
