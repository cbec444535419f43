"""This project against the authors' implementation, fairseq, on the same model and machine.

    python -m benchmarks.compare.fairseq --model_dir=runs/multi30k_en_de \\
        [--data_dir=...] [--sentences=N] [--latency_sentences=100] [--skip=whole_process,...]

The run is exported to fairseq (`convs2s_tf.interop.fairseq_export`), so both systems
translate the test split with the same weights and search (beam 5). Parts: `generate`
(fairseq-generate on the split binarised with the exported dictionaries, batches of
--batch_size and batch 1 over the first --latency_sentences, by fairseq's own timer);
`in_process` (this project's translator, per --in_process_dtypes, the same batches sorted
by length as fairseq sorts them, and batch 1); `saved_model` (`pipelines.export`, then a
fresh process as `benchmarks.translate_speed` times one); `whole_process`
(`pipelines.translate` against fairseq-interactive on raw text, the split and its first
sentence, and each command's import). Counts the identical translations; prints a table
of the ratios (> 1: this project faster) naming the CPU, then one JSON line.
"""

import functools
import json
import os
import tempfile
import time

from absl import app, flags

from benchmarks import (
    TestSplit,
    export_seconds,
    in_corpus_order,
    main,
    read_lines,
    request_milliseconds,
    run_prepared_data,
    run_python,
    translate_in_batches,
    write_lines,
)
from benchmarks.compare import fairseq_tools
from benchmarks.translate_speed import time_export

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
    flags.DEFINE_string("work_dir", None, "Keep outputs here (default: temporary).", **define)


class Comparison:
    """The test split, the run's fairseq export, and what is measured on them.

    Attributes:
        results: Measurements by name (the JSON line's entries).
        translations: Each system's translations of the split, in corpus order.
    """

    def __init__(self, options, work_dir, export, split, search_config):
        self.options, self.work_dir, self.export = options, work_dir, export
        self.split, self.sources, self.search_config = split, split.sources, search_config
        self.batch_size = options.batch_size
        self.results = {"sentences": len(split.sources), "latency_sentences": len(split.first)}
        self.translations = {}

    def path(self, name):
        return os.path.join(self.work_dir, name)

    def search_flags(self):
        """This project's flags for the compared search."""
        config = self.search_config
        names = ("beam_size", "max_len_a", "max_len_b")
        return [f"--{name}={getattr(config, name)}" for name in names]

    def _write_pieces(self, name, count):
        """Writes the first `count` pairs as pieces (fairseq's tokens); returns the prefix."""
        import sentencepiece as spm

        processor = spm.SentencePieceProcessor(model_file=self.export.sentencepiece_model)
        prefix = self.path(f"pieces_{name}")
        languages = (self.export.source_lang, self.export.target_lang)
        for language, texts in zip(languages, (self.split.sources, self.split.references)):
            pieces = processor.encode(texts[:count], out_type=str)
            write_lines(f"{prefix}.{language}", [" ".join(line) for line in pieces])
        return prefix

    def measure_generate(self):
        """fairseq-generate at --batch_size over the split and at batch 1."""
        count, latency = len(self.sources), len(self.split.first)
        prefixes = [self._write_pieces("all", count), self._write_pieces("first", latency)]
        data_bin = self.path("data_bin")
        fairseq_tools.preprocess(self.export, {"test": prefixes}, data_bin, self.work_dir)
        # fairseq-preprocess names the subsets of --testpref test, test1, ...
        settings = (self.search_config, self.work_dir)
        generate = functools.partial(fairseq_tools.generate, self.export, data_bin)
        batched = generate("test", count, self.batch_size, *settings)
        single = generate("test1", latency, 1, *settings)
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
            loaded = load_inference_model(self.options.model_dir, search_config=search_config)
            translator = loaded.translator()
            translator.translate(self.split.first[:1])  # untimed, as an export's warm-up
            start = time.perf_counter()
            translations = translate_in_batches(translator, self.split.sorted, self.batch_size)
            rate = len(self.sources) / (time.perf_counter() - start)
            self.results[f"in_process_{dtype}_batch_sentences_per_sec"] = round(rate, 2)
            restored = in_corpus_order(translations, self.split.order)
            self.translations[f"in-process {dtype}"] = restored
            if dtype == "float32":
                times = request_milliseconds(translator, self.split.first)
                self.results["in_process_float32_batch1_ms"] = round(sum(times) / len(times), 2)

    def measure_saved_model(self):
        """`pipelines.export` with default speed flags, timed in a fresh process."""
        export_dir = self.path("saved_model")
        seconds = export_seconds(self.options.model_dir, export_dir, *self.search_flags())
        output = self.path("saved_model_translations.txt")
        timings = time_export(export_dir, self.split, output, self.batch_size)
        self.results["saved_model_export_seconds"] = round(seconds, 2)
        self.results.update({f"saved_model_{key}": value for key, value in timings.items()})
        restored = in_corpus_order(read_lines(output), self.split.order)
        self.translations["fresh SavedModel"] = restored

    def measure_whole_process(self):
        """pipelines.translate against fairseq-interactive, as whole processes."""
        for name, lines in (("all", self.sources), ("one", self.sources[:1])):
            path = write_lines(self.path(f"source_{name}.txt"), lines)
            output = self.path(f"translate_{name}.txt")
            command = ["-m", "pipelines.translate", f"--model_dir={self.options.model_dir}"]
            command += [f"--input={path}", f"--output={output}", *self.search_flags()]
            self.results[f"translate_{name}_seconds"] = round(run_python(*command)[0], 2)
            settings = (self.options.interactive_batch_size, self.search_config, self.work_dir)
            interactive = fairseq_tools.interactive(self.export, path, len(lines), *settings)
            fairseq_seconds, fairseq_translations = interactive
            self.results[f"interactive_{name}_seconds"] = round(fairseq_seconds, 2)
            if name == "all":
                self.translations["pipelines.translate"] = read_lines(output)
                self.translations["fairseq-interactive"] = fairseq_translations
        self.measure_imports()

    def measure_imports(self):
        """The time each command line takes to import its module (Python's start-up
        included), and whether TensorFlow came with it (fairseq imports
        torch.utils.tensorboard, which imports TensorFlow where it is installed)."""
        modules = {"translate": "pipelines.translate", "interactive": "fairseq_cli.interactive"}
        for name, module in modules.items():
            code = f"import sys, {module}; print('tensorflow' in sys.modules)"
            seconds, stdout, _ = run_python("-c", code)
            self.results[f"import_{name}_seconds"] = round(seconds, 2)
            self.results[f"import_{name}_loads_tensorflow"] = stdout.strip() == "True"


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    import sentencepiece as spm

    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.interop.fairseq_export import export_run

    unknown = sorted(set(options.skip) - set(PARTS))
    if unknown:
        raise app.UsageError(f"Unknown --skip parts {unknown}; known: {', '.join(PARTS)}.")
    search_config = SearchConfig(
        beam_size=options.beam_size, max_len_a=options.max_len_a, max_len_b=options.max_len_b
    ).validate()
    prepared = run_prepared_data(options.model_dir, options.data_dir)
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = options.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        export = export_run(options.model_dir, os.path.join(work_dir, "fairseq"))
        processor = spm.SentencePieceProcessor(model_file=export.sentencepiece_model)
        limits = (options.sentences, options.latency_sentences)
        pieces = processor.encode  # fairseq sorts by length in pieces
        split = TestSplit(prepared, work_dir, *limits, lambda s: len(pieces(s)), options.split)
        comparison = Comparison(options, work_dir, export, split, search_config)
        print(fairseq_tools.header(options.model_dir, export, comparison), flush=True)
        for part in PARTS:
            if part not in options.skip:
                getattr(comparison, f"measure_{part}")()
                print(f"{part}: done", flush=True)
    print(fairseq_tools.table(comparison))
    print(json.dumps(fairseq_tools.summary(comparison)))


if __name__ == "__main__":
    main(define_flags, run)
