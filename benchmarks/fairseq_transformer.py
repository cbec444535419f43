"""The fairseq Transformer `benchmarks.compare_ctranslate2` trains: the small Transformer
a user choosing a fast CPU translator for Multi30k would train, in this project's budget.

Its shape is the one with the best published text-only Multi30k-only result: 4 encoder
and 4 decoder layers, 128 wide, 4 heads, feed-forward 256, one embedding table shared by
source, target and output (the SentencePiece vocabulary is joint). Its recipe is that
shape's usual one: dropout 0.3, Adam (0.9, 0.98), peak rate 5e-3 after 2,000 warm-up
updates then the inverse square root, label smoothing 0.1, 4,096-token batches, no
clipping; a checkpoint every epoch, and the model is the average of the last 10 (as the
published figure's). It trains on this project's prepared data and pieces, on the CPU,
for at most the given minutes (fairseq's `--stop-time-hours`), or until the validation
loss has not improved for 10 epochs.
"""

import glob
import os
import re

from benchmarks import fairseq_commands, fairseq_training

# fairseq-train's options for the model and its optimisation (see the module docstring).
RECIPE = (
    "--arch=transformer",
    "--encoder-layers=4",
    "--decoder-layers=4",
    "--encoder-embed-dim=128",
    "--decoder-embed-dim=128",
    "--encoder-ffn-embed-dim=256",
    "--decoder-ffn-embed-dim=256",
    "--encoder-attention-heads=4",
    "--decoder-attention-heads=4",
    "--share-all-embeddings",
    "--dropout=0.3",
    "--optimizer=adam",
    "--adam-betas=(0.9, 0.98)",
    "--lr=0.005",
    "--lr-scheduler=inverse_sqrt",
    "--warmup-updates=2000",
    "--warmup-init-lr=1e-07",
    "--weight-decay=0.0",
    "--clip-norm=0.0",
    "--criterion=label_smoothed_cross_entropy",
    "--label-smoothing=0.1",
    "--max-tokens=4096",
    "--patience=10",
)
AVERAGED_CHECKPOINTS = 10
AVERAGED_NAME = "averaged.pt"
_EPOCH_CHECKPOINT = re.compile(r"checkpoint(\d+)\.pt$")


def train(data_bin, languages, save_dir, minutes, seed, threads, max_epochs=0):
    """Trains the recipe on `data_bin` into `save_dir` for at most `minutes` (and at most
    `max_epochs` epochs, 0: no limit); returns fairseq-train's console (also in
    `save_dir/train.log`) and its wall seconds.

    Raises:
        CommandError: fairseq-train failed.
    """
    command = fairseq_commands.fairseq_command(
        "train",
        data_bin,
        f"--source-lang={languages[0]}",
        f"--target-lang={languages[1]}",
        *RECIPE,
        f"--stop-time-hours={minutes / 60.0}",
        f"--max-epoch={max_epochs}",
        f"--seed={seed}",
        f"--save-dir={save_dir}",
        f"--keep-last-epochs={AVERAGED_CHECKPOINTS}",
        "--cpu",
        "--no-progress-bar",
        "--log-format=simple",
        "--log-interval=50",
    )
    seconds, stdout, stderr = fairseq_commands.run_timed(
        command, save_dir, fairseq_training.environment(threads)
    )
    log = stdout + stderr
    with open(os.path.join(save_dir, "train.log"), "w", encoding="utf-8") as f:
        f.write(log)
    return log, seconds


def epoch_checkpoints(save_dir):
    """The epoch checkpoints fairseq kept in `save_dir`, oldest first."""
    found = []
    for path in glob.glob(os.path.join(save_dir, "checkpoint*.pt")):
        match = _EPOCH_CHECKPOINT.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def average(save_dir):
    """Averages the parameters of the last `AVERAGED_CHECKPOINTS` epoch checkpoints into
    `save_dir/averaged.pt` (the first's other state kept, as fairseq's own averaging
    script does); returns its path and the epochs averaged.

    Raises:
        FileNotFoundError: `save_dir` holds no epoch checkpoint.
    """
    import torch

    paths = epoch_checkpoints(save_dir)[-AVERAGED_CHECKPOINTS:]
    if not paths:
        raise FileNotFoundError(f"{save_dir} holds no epoch checkpoint (checkpointN.pt).")
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
    epochs = [int(_EPOCH_CHECKPOINT.search(path).group(1)) for path in paths]
    return output, epochs


def training_summary(log):
    """Epochs, updates and the last validation loss from fairseq-train's console."""
    lines = fairseq_training.progress_lines(log)
    summaries = [line for line in lines if line["tag"] == "train"]
    validations = re.findall(r"\| valid on 'valid' subset \| loss (\d+(?:\.\d+)?)", log)
    return {
        "epochs": summaries[-1]["epoch"] if summaries else 0,
        "updates": int(summaries[-1]["num_updates"]) if summaries else 0,
        "last_valid_loss": float(validations[-1]) if validations else None,
        "parameters": fairseq_training.parameters(log),
    }
