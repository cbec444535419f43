"""This project's default model against what a user picking a fast CPU translator would
use instead: a small fairseq Transformer served by CTranslate2. One machine, one run.

    python -m benchmarks.compare_ctranslate2 [--model_dir=runs/multi30k_en_de] \\
        [--work_dir=runs/compare_ctranslate2] [--train_minutes=58] [--seed=1]

Needs the `benchmark` extra (fairseq, PyTorch, CTranslate2). Steps, each skipped when its
output is already in --work_dir (so an interrupted comparison resumes):

1. the Transformer (`benchmarks.fairseq_transformer`: 4 + 4 layers, 128 wide, its recipe
   there) trained by fairseq-train on the run's prepared training and validation splits,
   written as the run's SentencePiece pieces, for at most --train_minutes, then the
   average of its last 10 epoch checkpoints;
2. that model converted by CTranslate2's fairseq converter, in float32 and int8;
3. this project's exports of --model_dir (`pipelines.export`, default speed flags):
   float32, bfloat16 and int8 weights (`--int8_weights`), each without and with the
   run's shortlist (built first by `pipelines.build_shortlist` if the run has none);
4. each of the eight translators in a fresh process (`benchmarks.ctranslate2_speed`,
   `benchmarks.fresh_saved_model`), beam 5, on the test split: load, batch 1 over the
   first --latency_sentences (mean ms, and again warm), batches of --batch_size sorted by
   length (sentences/s, the first pass), peak resident memory; then sacreBLEU (and the
   lowercased `intl` flavour) and chrF of its batched translations, and its size on disk.

Prints a table naming the CPU, then one JSON line. About 75 minutes on 2 cores (the
training is most of it); run it alone on the machine.
"""

import json
import os
import sys

from absl import app, flags

from benchmarks import fairseq_commands, fairseq_training, fairseq_transformer
from benchmarks.comparison_report import cpu_description
from benchmarks.run_files import length_order

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# This project's exports: name -> pipelines.export flags.
EXPORTS = {
    "convs2s_float32": ["--inference_dtype=float32"],
    "convs2s_bfloat16": ["--inference_dtype=bfloat16"],
    "convs2s_float32_shortlist": ["--inference_dtype=float32", "--shortlist"],
    "convs2s_bfloat16_shortlist": ["--inference_dtype=bfloat16", "--shortlist"],
    "convs2s_int8": ["--inference_dtype=float32", "--int8_weights"],
    "convs2s_int8_shortlist": ["--inference_dtype=float32", "--int8_weights", "--shortlist"],
}
# CTranslate2's models of the Transformer: name -> converter quantisation.
CTRANSLATE2_MODELS = {"transformer_ct2_float32": "float32", "transformer_ct2_int8": "int8"}

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string(
    "work_dir", os.path.join(ROOT, "runs", "compare_ctranslate2"), "Where everything goes."
)
flags.DEFINE_float("train_minutes", 58.0, "The Transformer's training budget.")
flags.DEFINE_integer("max_epochs", 0, "Stop the Transformer after N epochs (0: the budget).")
flags.DEFINE_integer("seed", 1, "The Transformer's training seed.")
flags.DEFINE_integer("sentences", 0, "Translate only the first N test sentences (0: all).")
flags.DEFINE_integer("latency_sentences", 100, "Sentences sent one at a time.")
flags.DEFINE_integer("batch_size", 128, "Sentences per batched request.")
flags.DEFINE_integer("threads", os.cpu_count() or 1, "Threads of fairseq and CTranslate2.")
flags.DEFINE_multi_enum(
    "translators",
    [*CTRANSLATE2_MODELS, *EXPORTS],
    [*CTRANSLATE2_MODELS, *EXPORTS],
    "The translators measured (repeat the flag for several).",
)
FLAGS = flags.FLAGS


def _run(arguments, cwd=ROOT):
    """`python ARGUMENTS...` (this interpreter); its stdout."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    return fairseq_commands.run_timed([sys.executable, *arguments], cwd, env)[1]


def _directory_mb(path):
    total = 0
    for folder, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(folder, name)) for name in files)
    return round(total / 2**20, 1)


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def train_transformer(prepared, work_dir):
    """Step 1: the averaged Transformer's checkpoint, its data directory and a summary of
    its training (read back from its console when it was trained before)."""
    save_dir = os.path.join(work_dir, "transformer")
    averaged = os.path.join(save_dir, fairseq_transformer.AVERAGED_NAME)
    data_bin = os.path.join(work_dir, "data_bin")
    languages = (prepared.source_lang, prepared.target_lang)
    if not os.path.isdir(data_bin):
        fairseq_training.write_data(prepared, work_dir, splits=("train", "validation"))
    if not os.path.isfile(averaged):
        os.makedirs(save_dir, exist_ok=True)
        print(f"training the Transformer for {FLAGS.train_minutes:g} minutes", flush=True)
        log, seconds = fairseq_transformer.train(
            data_bin,
            languages,
            save_dir,
            FLAGS.train_minutes,
            FLAGS.seed,
            FLAGS.threads,
            max_epochs=FLAGS.max_epochs,
        )
        _, epochs = fairseq_transformer.average(save_dir)
        summary = dict(
            fairseq_transformer.training_summary(log),
            wall_seconds=round(seconds),
            averaged_epochs=epochs,
        )
        with open(os.path.join(save_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f)
    with open(os.path.join(save_dir, "summary.json"), encoding="utf-8") as f:
        return averaged, data_bin, json.load(f)


def convert(checkpoint, data_bin, languages, work_dir):
    """Step 2: CTranslate2's models of `checkpoint`, by name."""
    paths = {}
    # fairseq checkpoints hold its configuration objects, which only a full unpickling
    # reads; this one was trained by this benchmark a step earlier, so it is trusted.
    for name, quantization in CTRANSLATE2_MODELS.items():
        if name not in FLAGS.translators:
            continue
        path = os.path.join(work_dir, "ctranslate2", quantization)
        if not os.path.isfile(os.path.join(path, "model.bin")):
            _run(
                [
                    "-m",
                    "ctranslate2.converters.fairseq",
                    f"--model_path={checkpoint}",
                    f"--data_dir={data_bin}",
                    f"--source_lang={languages[0]}",
                    f"--target_lang={languages[1]}",
                    f"--output_dir={path}",
                    f"--quantization={quantization}",
                    "--unsafe_deserialization",
                    "--force",
                ]
            )
        paths[name] = path
    return paths


def export(work_dir):
    """Step 3: this project's exports, by name (their version directories)."""
    from convs2s_tf.shortlist import shortlist_path

    names = [name for name in EXPORTS if name in FLAGS.translators]
    shortlisted = any("--shortlist" in EXPORTS[name] for name in names)
    if shortlisted and not os.path.isfile(shortlist_path(FLAGS.model_dir)):
        _run(["-m", "pipelines.build_shortlist", f"--model_dir={FLAGS.model_dir}"])
    paths = {}
    for name in names:
        arguments = EXPORTS[name]
        base = os.path.join(work_dir, "exports", name)
        if not os.path.isdir(base):
            _run(
                [
                    "-m",
                    "pipelines.export",
                    f"--model_dir={FLAGS.model_dir}",
                    f"--export_dir={base}",
                    *arguments,
                ]
            )
        versions = sorted(entry for entry in os.listdir(base) if entry.isdigit())
        paths[name] = os.path.join(base, versions[-1])
    return paths


class TestSplit:
    """The test split's sources and references, and the inputs every translator gets:
    the first --latency_sentences, and every sentence sorted by length in pieces (as
    fairseq forms batches), whose translations go back to corpus order."""

    def __init__(self, prepared, work_dir):
        import sentencepiece as spm

        from convs2s_tf.data.text_files import read_lines

        self.sources, self.references = (
            read_lines(path)[: FLAGS.sentences or None] for path in prepared.split_paths("test")
        )
        processor = spm.SentencePieceProcessor(model_file=prepared.sentencepiece_model_path)
        lengths = [len(pieces) for pieces in processor.encode(self.sources)]
        self.order = length_order(lengths)
        self.latency_input = _write_lines(
            os.path.join(work_dir, "first.txt"), self.sources[: FLAGS.latency_sentences]
        )
        self.throughput_input = _write_lines(
            os.path.join(work_dir, "sorted.txt"), [self.sources[i] for i in self.order]
        )

    def in_corpus_order(self, translations):
        restored = [None] * len(self.order)
        for translation, index in zip(translations, self.order):
            restored[index] = translation
        return restored


def measure(name, command, model_path, split, work_dir):
    """Step 4 for one translator: its child process's figures, its scores and size."""
    from convs2s_tf.data.text_files import read_lines
    from convs2s_tf.evaluation.bleu import corpus_scores

    output = os.path.join(work_dir, "translations", name + ".txt")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    stdout = _run(
        [
            "-m",
            *command,
            f"--latency_input={split.latency_input}",
            f"--throughput_input={split.throughput_input}",
            f"--output={output}",
            f"--batch_size={FLAGS.batch_size}",
        ]
    )
    figures = json.loads(stdout.strip().splitlines()[-1])
    scores = corpus_scores(split.in_corpus_order(read_lines(output)), split.references)
    figures.update(
        bleu=round(scores["bleu"], 2),
        bleu_lowercase_intl=round(scores["bleu_lowercase_intl"], 2),
        chrf=round(scores["chrf"], 2),
        size_mb=_directory_mb(model_path),
    )
    print(f"{name}: {json.dumps(figures)}", flush=True)
    return figures


def table(results, cpu):
    """The comparison as a Markdown table."""
    lines = [
        f"CPU: {cpu}. Beam 5, test split; batch 1: mean of the first "
        f"{FLAGS.latency_sentences} requests of a fresh process (then warm); batch "
        f"{FLAGS.batch_size}: sentences sorted by length, the first pass.",
        "",
        "| translator | BLEU | BLEU (lowercased, intl) | chrF | batch 1 ms (warm) "
        f"| batch {FLAGS.batch_size} sentences/s | peak memory MiB | size on disk MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, figures in results.items():
        lines.append(
            f"| {name} | {figures['bleu']:.2f} | {figures['bleu_lowercase_intl']:.2f} "
            f"| {figures['chrf']:.2f} | {figures['batch1_mean_ms']:.2f} "
            f"({figures['batch1_warm_mean_ms']:.2f}) | {figures['batch_sentences_per_sec']:.1f} "
            f"| {figures['peak_rss_mb']:,.0f} | {figures['size_mb']:.1f} |"
        )
    return "\n".join(lines)


def main(argv):
    del argv
    from convs2s_tf.data.data_directory import PreparedData
    from convs2s_tf.runs import RunDirectory

    run = RunDirectory(FLAGS.model_dir)
    data_dir = run.data_dir(run.read_config())
    if not data_dir:
        raise app.UsageError(f"{FLAGS.model_dir} names no prepared data directory.")
    prepared = PreparedData.load(data_dir)
    work_dir = FLAGS.work_dir
    os.makedirs(work_dir, exist_ok=True)
    cpu = cpu_description()
    checkpoint, data_bin, training = train_transformer(prepared, work_dir)
    print(f"Transformer: {json.dumps(training)}", flush=True)
    languages = (prepared.source_lang, prepared.target_lang)
    split = TestSplit(prepared, work_dir)
    results = {}
    for name, path in convert(checkpoint, data_bin, languages, work_dir).items():
        command = [
            "benchmarks.ctranslate2_speed",
            f"--model={path}",
            f"--compute_type={CTRANSLATE2_MODELS[name]}",
            f"--sentencepiece_model={prepared.sentencepiece_model_path}",
            f"--threads={FLAGS.threads}",
        ]
        results[name] = measure(name, command, path, split, work_dir)
    for name, path in export(work_dir).items():
        command = ["benchmarks.fresh_saved_model", f"--saved_model={path}"]
        results[name] = measure(name, command, path, split, work_dir)
    print(table(results, cpu))
    print(json.dumps({"cpu": cpu, "transformer": training, "translators": results}))


if __name__ == "__main__":
    app.run(main)
