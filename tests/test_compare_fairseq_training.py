"""benchmarks.compare.fairseq_training: the options it gives fairseq-train for this
project's models, the rates it reads from fairseq's log, its report, a tiny fairseq-train
run on the same data and model, and the benchmark end to end on a tiny config."""

import json

import pytest
from absl import flags
from helpers.corpora import TINY_MODEL_FLAGS, local_corpus_flags
from helpers.models import small_model_config

from benchmarks import FLAGFILE, CommandError, config_flags, model_config
from benchmarks.compare import fairseq_tools, fairseq_training
from pipelines.flags.training import training_config_from_flags

CONFIG_MODEL = "config"


def model_arguments(name, vocab_size):
    return fairseq_training.model_arguments(model_config(name, vocab_size, FLAGFILE))


# What fairseq 0.12's fairseq-train logs (`--log-format=simple --log-interval=2`).
LOG = """\
2026-11-25 13:31:53 | INFO | fairseq_cli.train | num. shared model params: 8,048,448 \
(num. trained: 8,048,448)
2026-11-25 13:31:58 | INFO | train_inner | epoch 001:      2 / 3 loss=13.024, nll_loss=13.024, \
ppl=8327.33, wps=2000, ups=0.83, wpb=2500, bsz=180, num_updates=2, lr=0.25, gnorm=0.498, \
clip=100, train_wall=2, wall=3
2026-11-25 13:32:03 | INFO | train | epoch 001 | loss 12.827 | nll_loss 12.802 | ppl 7139.69 | \
wps 2674.2 | ups 1 | wpb 2657.1 | bsz 166.2 | num_updates 3 | lr 0.25 | gnorm 0.489 | clip 100 | \
train_wall 9 | wall 10
2026-11-25 13:32:04 | INFO | train_inner | epoch 002:      1 / 3 loss=12.457, nll_loss=12.38, \
ppl=5331.75, wps=3000, ups=1, wpb=3000, bsz=120, num_updates=4, lr=0.25, gnorm=0.538, clip=100, \
train_wall=2, wall=11
2026-11-25 13:32:06 | INFO | train_inner | epoch 002:      3 / 3 loss=11.962, nll_loss=11.806, \
ppl=3580.74, wps=1.5e3, ups=1.16, wpb=1500, bsz=168, num_updates=6, lr=0.25, gnorm=0.721, \
clip=100, train_wall=2, wall=13
2026-11-25 13:32:11 | INFO | train | epoch 002 | loss 11.883 | nll_loss 11.627 | ppl 3162.71 | \
wps 2906.2 | ups 1.09 | wpb 2657.1 | bsz 166.2 | num_updates 6 | lr 0.25 | gnorm 2.561 | \
clip 100 | train_wall 8 | wall 18
"""


def test_progress_lines_are_read_with_their_numbers():
    lines = fairseq_tools.progress_lines(LOG)
    assert [(line["tag"], line["epoch"]) for line in lines] == [
        ("train_inner", 1),
        ("train", 1),
        ("train_inner", 2),
        ("train_inner", 2),
        ("train", 2),
    ]
    assert lines[1]["wps"] == 2674.2 and lines[1]["num_updates"] == 3
    assert lines[3]["wps"] == 1500.0 and lines[3]["wpb"] == 1500.0
    assert fairseq_tools.parameters(LOG) == 8048448


def test_the_second_epochs_rate_is_its_summarys():
    rate = fairseq_training.epoch_rate(LOG)
    assert rate["steps"] == 3  # updates 4 to 6
    assert rate["target_tokens"] == pytest.approx(3 * 2657.1)
    assert rate["target_tokens_per_sec"] == pytest.approx(2906.2)
    with pytest.raises(CommandError, match="no summary of epoch 3"):
        fairseq_training.epoch_rate(LOG, epoch=3)


def test_the_rate_after_warmup_is_over_the_later_intervals():
    # Updates 3-4 (3,000 tokens per update at 3,000/s: 2 s) and 5-6 (1,500 at 1,500/s: 2 s).
    rate = fairseq_training.interval_rate(LOG, warmup_updates=2)
    assert rate["steps"] == 4 and rate["seconds"] == pytest.approx(4.0)
    assert rate["target_tokens_per_sec"] == pytest.approx(9000 / 4)
    with pytest.raises(CommandError, match="after update 6"):
        fairseq_training.interval_rate(LOG, warmup_updates=6)


def test_the_default_configs_model_is_fconv_iwslt_de_en_with_its_options():
    arguments = model_arguments(CONFIG_MODEL, 8000)
    assert arguments[0] == "--arch=fconv_iwslt_de_en"
    assert "--dropout=0.3" in arguments and "--share-input-output-embed" in arguments
    assert "--encoder-layers=[(256, 3), (256, 3), (256, 3), (256, 3)]" in arguments
    assert "--decoder-out-embed-dim=256" in arguments
    preset = model_arguments("iwslt_de_en", 8000)
    assert preset[0] == "--arch=fconv_iwslt_de_en" and "--dropout=0.1" in preset
    assert "--share-input-output-embed" not in preset
    wmt = model_arguments("wmt_en_de", 40000)
    assert wmt[0] == "--arch=fconv_wmt_en_de"


def test_the_training_options_are_the_configs_optimiser():
    arguments = fairseq_training.training_arguments(
        training_config_from_flags(config_flags(f"--flagfile={FLAGFILE}")), 4000
    )
    for expected in (
        "--optimizer=nag",
        "--momentum=0.99",
        "--lr=0.25",
        "--clip-norm=0.1",
        "--criterion=label_smoothed_cross_entropy",
        "--label-smoothing=0.1",
        "--max-tokens=4000",
    ):
        assert expected in arguments
    command = fairseq_training.train_command("bin", ("en", "de"), arguments, steps=100)
    assert command[1:4] == ["-m", "fairseq_cli.train", "bin"]
    assert "--max-update=100" in command and "--cpu" in command
    assert "--disable-validation" in command and "--no-save" in command
    assert "--max-epoch=2" in fairseq_training.train_command("bin", ("en", "de"), arguments)


def test_the_ratios_are_above_one_when_this_project_is_faster():
    figures = {"target_tokens": 4000.0, "steps": 2, "seconds": 2.0, "parameters": 10}
    results = {
        "config": {
            "fairseq": dict(figures, target_tokens_per_sec=2000.0, architecture="fconv_x"),
            "float32": dict(figures, target_tokens_per_sec=3000.0),
            "bfloat16": dict(figures, target_tokens_per_sec=5000.0),
        }
    }
    summary = fairseq_training.summary(results, "some CPU")
    assert summary["ratio_config_float32"] == 1.5 and summary["ratio_config_bfloat16"] == 2.5
    assert summary["config_fairseq_target_tokens_per_sec"] == 2000
    table = fairseq_training.table(results, "some CPU")
    assert "| config | fairseq-train (fconv_x), float32 | 10 | 2,000 | 2 in 2.0 s | 2,000 |  |" in (
        table
    )
    assert "| config | this project, bfloat16 | 10 | 5,000 | 2 in 2.0 s | 2,000 | 2.50x |" in table


@pytest.mark.slow
def test_fairseq_trains_the_same_model_on_the_same_tokens(small_prepared, tmp_path):
    import sentencepiece as spm

    from convs2s_tf.models import ConvS2S
    from convs2s_tf.training import TrainingConfig

    prepared = small_prepared.data
    pairs = 200
    data_bin, vocab_size = fairseq_tools.write_data(prepared, str(tmp_path), limit=pairs)
    config = small_model_config(
        vocab_size, max_positions=256, dropout=0.2, share_decoder_input_output_embed=True
    )
    arguments = fairseq_training.model_arguments(config)
    assert arguments[0] == "--arch=fconv" and "--share-input-output-embed" in arguments
    figures = fairseq_training.train(
        data_bin,
        (prepared.source_lang, prepared.target_lang),
        # Every sentence: fairseq's default multiple (8) drops the last batch of the epoch
        # when it holds fewer (fairseq issue #5036).
        arguments
        + fairseq_training.training_arguments(TrainingConfig(), 400)
        + ["--required-batch-size-multiple=1"],
        threads=1,
        cwd=str(tmp_path),
        log_interval=1,
    )
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    assert figures["parameters"] == model.count_params()
    # The second epoch covers every target token: its pieces and one end-of-sentence each.
    processor = spm.SentencePieceProcessor(model_file=prepared.sentencepiece_model_path)
    with open(prepared.split_paths("train")[1], encoding="utf-8") as f:
        targets = f.read().split("\n")[:pairs]
    expected = sum(len(pieces) + 1 for pieces in processor.encode(targets))
    assert figures["target_tokens"] == pytest.approx(expected, rel=1e-3)
    assert figures["steps"] > 1 and figures["target_tokens_per_sec"] > 0


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_the_comparison_end_to_end(short_corpus, tmp_path, capsys):
    config = tmp_path / "tiny.cfg"
    lines = [f"--data_dir={tmp_path / 'data'}", *local_corpus_flags(short_corpus)]
    config.write_text("\n".join([*lines, *TINY_MODEL_FLAGS]) + "\n")
    options = flags.FlagValues()
    fairseq_training.define_flags(options)
    options(
        [
            "benchmark",
            f"--config={config}",
            "--models=config",
            "--dtypes=float32",
            "--steps=2",
            "--fairseq_warmup_updates=2",
            "--fairseq_log_interval=1",
            "--fairseq_threads=1",
        ]
    )
    fairseq_training.run(options)
    output = capsys.readouterr().out
    line = json.loads(output.strip().splitlines()[-1])
    assert line["config_fairseq_target_tokens_per_sec"] > 0
    assert line["config_float32_target_tokens_per_sec"] > 0 and line["ratio_config_float32"] > 0
    assert (line["steps"], line["fairseq_threads"]) == (2, 1) and line["cpu"]
    assert "| config | this project, float32 |" in output
