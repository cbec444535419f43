"""This project's default model against what a user picking a fast CPU translator would
use instead: a small fairseq Transformer served by CTranslate2. One machine, one run.

    python -m benchmarks.compare.ctranslate2 [--model_dir=runs/multi30k_en_de] \\
        [--work_dir=runs/compare_ctranslate2] [--train_minutes=58] [--seed=1]

Needs the `benchmark` extra. Steps, each skipped when its output is in --work_dir (an
interrupted comparison resumes): 1. the Transformer of `RECIPE` (4 + 4 layers, 128 wide,
4 heads, feed-forward 256, one shared embedding: the shape of the best published
text-only Multi30k result) trained by fairseq-train on the run's prepared data as its
SentencePiece pieces, for at most --train_minutes or until 10 epochs without a better
validation loss, then its last 10 epoch checkpoints averaged; 2. that model converted by
CTranslate2 in float32 and int8; 3. this project's exports of --model_dir (`EXPORTS`:
float32, bfloat16 and int8 weights, each without and with the run's shortlist, built
first if missing); 4. each translator in a fresh process (`benchmarks.translate_speed`'s
for the exports), beam 5, on the test split: load, batch 1 over the first
--latency_sentences (then warm), batches of --batch_size sorted by length, peak memory,
BLEU and chrF, size on disk. Prints a table naming the CPU, then one JSON line. About 75
minutes on 2 cores; run it alone on the machine.
"""

import time

_START = time.perf_counter()

import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

from absl import flags  # noqa: E402

from benchmarks import (  # noqa: E402
    ROOT,
    TestSplit,
    child_command,
    cpu_description,
    define_child_flags,
    directory_bytes,
    export_seconds,
    last_json,
    main,
    read_lines,
    run_prepared_data,
    run_python,
    run_timed,
    time_fresh_process,
)
from benchmarks.compare.fairseq_tools import (  # noqa: E402
    environment,
    fairseq_train_command,
    parameters,
    progress_lines,
    write_data,
)
from benchmarks.translate_speed import time_export  # noqa: E402

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

# fairseq-train's options for the model and its optimisation (see the module docstring).
# fmt: off
RECIPE = (
    "--arch=transformer", "--encoder-layers=4", "--decoder-layers=4",
    "--encoder-embed-dim=128", "--decoder-embed-dim=128",
    "--encoder-ffn-embed-dim=256", "--decoder-ffn-embed-dim=256",
    "--encoder-attention-heads=4", "--decoder-attention-heads=4",
    "--share-all-embeddings", "--dropout=0.3",
    "--optimizer=adam", "--adam-betas=(0.9, 0.98)", "--lr=0.005", "--lr-scheduler=inverse_sqrt",
    "--warmup-updates=2000", "--warmup-init-lr=1e-07", "--weight-decay=0.0", "--clip-norm=0.0",
    "--criterion=label_smoothed_cross_entropy", "--label-smoothing=0.1",
    "--max-tokens=4096", "--patience=10",
)
# fmt: on
AVERAGED_CHECKPOINTS = 10
AVERAGED_NAME = "averaged.pt"
_EPOCH_CHECKPOINT = re.compile(r"checkpoint(\d+)\.pt$")


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    run = os.path.join(ROOT, "runs", "multi30k_en_de")
    flags.DEFINE_string("model_dir", run, "Trained run.", **define)
    work_dir = os.path.join(ROOT, "runs", "compare_ctranslate2")
    flags.DEFINE_string("work_dir", work_dir, "Where everything goes.", **define)
    flags.DEFINE_float("train_minutes", 58.0, "The Transformer's training budget.", **define)
    flags.DEFINE_integer(
        "max_epochs", 0, "Stop the Transformer after N epochs (0: budget).", **define
    )
    flags.DEFINE_integer("seed", 1, "The Transformer's training seed.", **define)
    flags.DEFINE_integer("sentences", 0, "Translate only the first N test sentences.", **define)
    flags.DEFINE_integer("latency_sentences", 100, "Sentences sent one at a time.", **define)
    flags.DEFINE_integer("batch_size", 128, "Sentences per batched request.", **define)
    threads = os.cpu_count() or 1
    flags.DEFINE_integer("threads", threads, "Threads of fairseq and CTranslate2.", **define)
    names = [*CTRANSLATE2_MODELS, *EXPORTS]
    flags.DEFINE_multi_enum("translators", names, names, "Translators (repeatable).", **define)
    flags.DEFINE_list("export_flags", [], "More pipelines.export flags, every export.", **define)
    # A fresh CTranslate2 process (what step 4 runs for each CTranslate2 model).
    flags.DEFINE_string("child_model", None, "Time this CTranslate2 model here.", **define)
    compute_types = ["float32", "int8", "int8_float32"]
    flags.DEFINE_enum("compute_type", "float32", compute_types, "Its compute.", **define)
    flags.DEFINE_string("sentencepiece_model", None, "The child's pieces' model.", **define)
    flags.DEFINE_integer("max_length", 200, "Most target pieces (max_len_b).", **define)
    define_child_flags(flag_values)


class TextTranslator:
    """Raw text to raw text through a `ctranslate2.Translator` (SentencePiece pieces in,
    pieces out and detokenised, as this project's export does inside its graph), with the
    project's translators' result shape: a list of (text, score) lists, best first."""

    def __init__(self, translator, processor, beam_size=5, max_length=200, batch_size=128):
        self.translator, self.processor = translator, processor
        self.beam_size, self.max_length, self.batch_size = beam_size, max_length, batch_size

    def translate(self, texts):
        results = self.translator.translate_batch(
            self.processor.encode(texts, out_type=str),
            beam_size=self.beam_size,
            max_batch_size=self.batch_size,
            max_decoding_length=self.max_length,
            return_scores=True,
        )
        return [
            [(self.processor.decode(result.hypotheses[0]), result.scores[0])] for result in results
        ]


def ctranslate2_child(options):
    """A fresh process's figures of a CTranslate2 model (`time_fresh_process`'s, as an
    export's): loaded on the CPU, one translation at a time on --threads threads."""
    import ctranslate2
    import sentencepiece as spm

    def load():
        translator = ctranslate2.Translator(
            options.child_model,
            device="cpu",
            compute_type=options.compute_type,
            inter_threads=1,
            intra_threads=options.threads,
        )
        processor = spm.SentencePieceProcessor(model_file=options.sentencepiece_model)
        return TextTranslator(translator, processor, 5, options.max_length, options.batch_size)

    return time_fresh_process(load, options, _START)[1]


def train_transformer_recipe(data_bin, languages, save_dir, minutes, seed, threads, max_epochs=0):
    """Trains the recipe on `data_bin` into `save_dir` for at most `minutes` (and at most
    `max_epochs` epochs, 0: no limit); returns fairseq-train's console (also in
    `save_dir/train.log`) and its wall seconds.

    Raises:
        CommandError: fairseq-train failed.
    """
    command = fairseq_train_command(
        data_bin,
        languages,
        *RECIPE,
        f"--stop-time-hours={minutes / 60.0}",
        f"--max-epoch={max_epochs}",
        f"--seed={seed}",
        f"--save-dir={save_dir}",
        f"--keep-last-epochs={AVERAGED_CHECKPOINTS}",
        log_interval=50,
    )
    seconds, stdout, stderr = run_timed(command, save_dir, environment(threads))
    log = stdout + stderr
    with open(os.path.join(save_dir, "train.log"), "w", encoding="utf-8") as f:
        f.write(log)
    return log, seconds


def average(save_dir):
    """Averages the parameters of the last `AVERAGED_CHECKPOINTS` epoch checkpoints into
    `save_dir/averaged.pt` (the first's other state kept, as fairseq's own averaging
    script does); returns its path and the epochs averaged. Raises FileNotFoundError if
    `save_dir` holds no epoch checkpoint."""
    import torch

    paths = glob.glob(os.path.join(save_dir, "checkpoint*.pt"))
    found = sorted((int(m.group(1)), p) for p in paths if (m := _EPOCH_CHECKPOINT.search(p)))
    found = found[-AVERAGED_CHECKPOINTS:]
    if not found:
        raise FileNotFoundError(f"{save_dir} holds no epoch checkpoint (checkpointN.pt).")
    epochs, paths = [epoch for epoch, _ in found], [path for _, path in found]
    first, totals = None, {}
    for path in paths:
        # Checkpoints this benchmark's own fairseq-train just wrote (they hold its
        # configuration objects, which weights_only loading refuses).
        state = torch.load(path, map_location="cpu", weights_only=False)
        for name, value in state["model"].items():
            totals[name] = totals.get(name, 0.0) + value.double()
        first = first or state
    first["model"] = {
        name: (total / len(paths)).to(first["model"][name].dtype) for name, total in totals.items()
    }
    output = os.path.join(save_dir, AVERAGED_NAME)
    torch.save(first, output)
    return output, epochs


def training_summary(log):
    """Epochs, updates and the last validation loss from fairseq-train's console."""
    lines = progress_lines(log)
    summaries = [line for line in lines if line["tag"] == "train"]
    validations = re.findall(r"\| valid on 'valid' subset \| loss (\d+(?:\.\d+)?)", log)
    return {
        "epochs": summaries[-1]["epoch"] if summaries else 0,
        "updates": int(summaries[-1]["num_updates"]) if summaries else 0,
        "last_valid_loss": float(validations[-1]) if validations else None,
        "parameters": parameters(log),
    }


def train_transformer(options, prepared, work_dir):
    """Step 1: the averaged Transformer's checkpoint, its data directory and a summary of
    its training (read back from its console when it was trained before)."""
    save_dir = os.path.join(work_dir, "transformer")
    averaged = os.path.join(save_dir, AVERAGED_NAME)
    data_bin = os.path.join(work_dir, "data_bin")
    languages = (prepared.source_lang, prepared.target_lang)
    if not os.path.isdir(data_bin):
        write_data(prepared, work_dir, splits=("train", "validation"))
    if not os.path.isfile(averaged):
        os.makedirs(save_dir, exist_ok=True)
        print(f"training the Transformer for {options.train_minutes:g} minutes", flush=True)
        settings = (options.train_minutes, options.seed, options.threads, options.max_epochs)
        log, seconds = train_transformer_recipe(data_bin, languages, save_dir, *settings)
        _, epochs = average(save_dir)
        summary = dict(training_summary(log), wall_seconds=round(seconds), averaged_epochs=epochs)
        with open(os.path.join(save_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f)
    with open(os.path.join(save_dir, "summary.json"), encoding="utf-8") as f:
        return averaged, data_bin, json.load(f)


def convert(options, checkpoint, data_bin, languages, work_dir):
    """Step 2: CTranslate2's models of `checkpoint`, by name."""
    paths = {}
    for name, quantization in CTRANSLATE2_MODELS.items():
        if name not in options.translators:
            continue
        path = os.path.join(work_dir, "ctranslate2", quantization)
        if not os.path.isfile(os.path.join(path, "model.bin")):
            # fairseq checkpoints hold its configuration objects, which only a full
            # unpickling reads; this one was trained by this benchmark, so it is trusted.
            run_python(
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
            )
        paths[name] = path
    return paths


def export(options, work_dir):
    """Step 3: this project's exports, by name (their version directories)."""
    from convs2s_tf.shortlist import shortlist_path

    names = [name for name in EXPORTS if name in options.translators]
    shortlisted = any("--shortlist" in EXPORTS[name] for name in names)
    if shortlisted and not os.path.isfile(shortlist_path(options.model_dir)):
        run_python("-m", "pipelines.build_shortlist", f"--model_dir={options.model_dir}")
    paths = {}
    for name in names:
        base = os.path.join(work_dir, "exports", name)
        if not os.path.isdir(base):
            export_seconds(options.model_dir, base, *EXPORTS[name], *options.export_flags)
        versions = sorted(entry for entry in os.listdir(base) if entry.isdigit())
        paths[name] = os.path.join(base, versions[-1])
    return paths


def scored(name, figures, output, model_path, split):
    """Step 4 for one translator: the figures of its fresh process, with the scores of its
    translations (in `output`) and its size."""
    figures.update(split.scores(read_lines(output)))
    figures["size_mb"] = round(directory_bytes(model_path) / 2**20, 1)
    print(f"{name}: {json.dumps(figures)}", flush=True)
    return figures


def table(options, results, cpu):
    """The comparison as a Markdown table."""
    lines = [
        f"CPU: {cpu}. Beam 5, test split; batch 1: mean of the first "
        f"{options.latency_sentences} requests of a fresh process (then warm); batch "
        f"{options.batch_size}: sentences sorted by length, the first pass.",
        "",
        "| translator | BLEU | BLEU (lowercased, intl) | chrF | batch 1 ms (warm) "
        f"| batch {options.batch_size} sentences/s | peak memory MiB | size on disk MiB |",
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


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    import sentencepiece as spm

    if options.child_model:
        print(json.dumps(ctranslate2_child(options)))
        return
    prepared = run_prepared_data(options.model_dir)
    work_dir = options.work_dir
    os.makedirs(os.path.join(work_dir, "translations"), exist_ok=True)
    cpu = cpu_description()
    checkpoint, data_bin, training = train_transformer(options, prepared, work_dir)
    print(f"Transformer: {json.dumps(training)}", flush=True)
    languages = (prepared.source_lang, prepared.target_lang)
    pieces = spm.SentencePieceProcessor(model_file=prepared.sentencepiece_model_path).encode
    limits = (options.sentences, options.latency_sentences)
    split = TestSplit(prepared, work_dir, *limits, lambda sentence: len(pieces(sentence)))
    results = {}
    for name, path in convert(options, checkpoint, data_bin, languages, work_dir).items():
        output = os.path.join(work_dir, "translations", name + ".txt")
        command = child_command(
            "benchmarks.compare.ctranslate2",
            split,
            output,
            options.batch_size,
            f"--child_model={path}",
            f"--compute_type={CTRANSLATE2_MODELS[name]}",
            f"--sentencepiece_model={prepared.sentencepiece_model_path}",
            f"--threads={options.threads}",
        )
        results[name] = scored(name, last_json(run_timed(command)[1]), output, path, split)
    for name, path in export(options, work_dir).items():
        output = os.path.join(work_dir, "translations", name + ".txt")
        figures = time_export(path, split, output, options.batch_size)
        results[name] = scored(name, figures, output, path, split)
    print(table(options, results, cpu))
    print(json.dumps({"cpu": cpu, "transformer": training, "translators": results}))


if __name__ == "__main__":
    main(define_flags, run)
