"""The small Transformer a user picking a fast CPU translator would use instead of this
project: fairseq-trained (`RECIPE`: 4 + 4 layers, 128 wide, 4 heads, feed-forward 256,
one shared embedding, the shape of the best published text-only Multi30k result) on a
prepared data directory's SentencePiece pieces, its last epochs averaged, converted by
CTranslate2 in float32 and int8, and timed in a fresh process (`child`) as this project's
exports are. Used by `benchmarks.compare.ctranslate2`; needs the `benchmark` extra.
"""

import glob
import json
import os
import re

from benchmarks import run_timed, time_fresh_process
from benchmarks.compare.fairseq_tools import (
    environment,
    fairseq_train_command,
    parameters,
    progress_lines,
    write_data,
)

# The most pieces CTranslate2 generates (this project's default max_len_b).
MAX_LENGTH = 200
# CTranslate2's quantisations of the Transformer.
QUANTIZATIONS = ("float32", "int8")
# fairseq-train's options for the model and its optimisation (see the module docstring).
# fmt: off
RECIPE = (
    "--arch=transformer", "--encoder-layers=4", "--decoder-layers=4",
    "--encoder-embed-dim=128", "--decoder-embed-dim=128",
    "--encoder-ffn-embed-dim=256", "--decoder-ffn-embed-dim=256",
    "--encoder-attention-heads=4", "--decoder-attention-heads=4",
    "--share-all-embeddings", "--dropout=0.3",
    "--optimizer=adam", "--adam-betas=(0.9, 0.98)", "--lr=0.005", "--lr-scheduler=inverse_sqrt",
    "--warmup-init-lr=1e-07", "--weight-decay=0.0", "--clip-norm=0.0",
    "--criterion=label_smoothed_cross_entropy", "--label-smoothing=0.1",
    "--max-tokens=4096", "--patience=10",
)
# fmt: on
# The recipe's budget; a shorter one scales the warm-up and the epochs averaged with it.
RECIPE_MINUTES = 58.0
WARMUP_UPDATES = 2000
AVERAGED_CHECKPOINTS = 10
AVERAGED_NAME = "averaged.pt"
_EPOCH_CHECKPOINT = re.compile(r"checkpoint(\d+)\.pt$")


class TextTranslator:
    """Raw text to raw text through a `ctranslate2.Translator` and a SentencePiece
    processor (pieces in, pieces out, detokenised), with the project's translators' result
    shape: a list of (text, score) lists, best first."""

    def __init__(self, translator, processor, **search):
        self.translator, self.processor, self.search = translator, processor, search

    def translate(self, texts):
        pieces = self.processor.encode(texts, out_type=str)
        results = self.translator.translate_batch(pieces, return_scores=True, **self.search)
        return [[(self.processor.decode(r.hypotheses[0]), r.scores[0])] for r in results]


def child(options, process_start):
    """A fresh process's figures (`time_fresh_process`'s) of the CTranslate2 model
    --child_model on --threads threads in --compute_type, beam --child_beam."""
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
        search = dict(beam_size=options.child_beam, max_batch_size=options.batch_size)
        return TextTranslator(translator, processor, max_decoding_length=MAX_LENGTH, **search)

    return time_fresh_process(load, options, process_start)[1]


def scaled_schedule(minutes):
    """The warm-up updates and the epochs averaged for a budget of `minutes`: the recipe's
    (2,000 and 10 in 58 minutes) in proportion, so that a short run is not still warming up
    and does not average its first epochs (at least 1 of each)."""
    share = min(minutes / RECIPE_MINUTES, 1.0)
    return max(1, round(WARMUP_UPDATES * share)), max(1, int(AVERAGED_CHECKPOINTS * share))


def average(save_dir, last=AVERAGED_CHECKPOINTS):
    """Averages the parameters of the `last` epoch checkpoints into `save_dir/averaged.pt`
    (the first's other state kept, as fairseq's own averaging script does); returns its
    path and the epochs averaged. Raises FileNotFoundError if `save_dir` holds no epoch
    checkpoint."""
    import torch

    paths = glob.glob(os.path.join(save_dir, "checkpoint*.pt"))
    found = sorted((int(m.group(1)), p) for p in paths if (m := _EPOCH_CHECKPOINT.search(p)))
    found = found[-last:]
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


def train(prepared, work_dir, minutes, seed, threads, max_epochs=0):
    """The recipe trained on `prepared` (a `PreparedData`) into `work_dir` for at most
    `minutes` of training (and `max_epochs` epochs; 0: no limit) or until 10 epochs without
    a better validation loss, its last epochs averaged; skipped when `work_dir` holds a
    summary, resumed from its last epoch's checkpoint when interrupted.
    Returns the averaged checkpoint, fairseq's data directory and the training summary."""
    save_dir, data_bin = os.path.join(work_dir, "checkpoints"), os.path.join(work_dir, "data_bin")
    summary_path = os.path.join(work_dir, "summary.json")
    if not os.path.isfile(summary_path):
        os.makedirs(save_dir, exist_ok=True)
        write_data(prepared, work_dir, splits=("train", "validation"))
        print(f"training the Transformer of {work_dir} for {minutes:g} minutes", flush=True)
        # fairseq counts --stop-time-hours against the training time its checkpoints carry
        # (`previous_training_time`), so a resumed run keeps the one budget.
        warmup, averaged = scaled_schedule(minutes)
        budget = [f"--stop-time-hours={minutes / 60.0}", f"--max-epoch={max_epochs}"]
        budget += [f"--seed={seed}", f"--save-dir={save_dir}", f"--warmup-updates={warmup}"]
        budget.append(f"--keep-last-epochs={averaged}")
        languages = (prepared.source_lang, prepared.target_lang)
        command = fairseq_train_command(data_bin, languages, *RECIPE, *budget, log_interval=50)
        seconds, stdout, stderr = run_timed(command, save_dir, environment(threads))
        with open(os.path.join(save_dir, "train.log"), "w", encoding="utf-8") as f:
            f.write(stdout + stderr)
        _, epochs = average(save_dir, averaged)
        summary = training_summary(stdout + stderr)
        summary.update(wall_seconds=round(seconds), averaged_epochs=epochs)
        with open(summary_path, "w", encoding="utf-8") as f:
            json.dump(summary, f)
    with open(summary_path, encoding="utf-8") as f:
        return os.path.join(save_dir, AVERAGED_NAME), data_bin, json.load(f)


def convert(checkpoint, data_bin, languages, work_dir):
    """CTranslate2's models of `checkpoint` (`work_dir/ctranslate2/QUANTIZATION`, made
    when missing), by quantisation."""
    from ctranslate2.converters import FairseqConverter

    paths = {q: os.path.join(work_dir, "ctranslate2", q) for q in QUANTIZATIONS}
    missing = [q for q in QUANTIZATIONS if not os.path.isfile(f"{paths[q]}/model.bin")]
    if missing:
        # fairseq checkpoints hold its configuration objects, which only a full
        # unpickling reads; this one was trained by this benchmark, so it is trusted.
        converter = FairseqConverter(checkpoint, data_bin, *languages, unsafe_deserialization=True)
        for q in missing:
            converter.convert(paths[q], quantization=q, force=True)
    return paths
