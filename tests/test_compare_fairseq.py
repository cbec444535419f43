"""benchmarks.compare.fairseq: reading fairseq's output and the report, on fairseq's own
output format, and the comparison end to end on the tiny run."""

import json
import types

import pytest
from absl import flags

from benchmarks.compare import fairseq as compare_fairseq
from benchmarks.compare import fairseq_tools
from convs2s_tf.decoding import SearchConfig

# What fairseq-generate prints (stdout) and logs (stderr), in fairseq 0.12's format.
GENERATE_STDOUT = (
    "S-1\t▁Zwei ▁Hunde\nT-1\t▁Two ▁dogs\nH-1\t-0.31\t▁Two ▁dogs\nD-1\t-0.31\tTwo dogs\n"
    "P-1\t-0.5 -0.2 -0.1\n"
    "S-0\t▁Ein ▁Mann\nT-0\t▁A ▁man\nH-0\t-0.25\t▁A ▁man\nD-0\t-0.25\tA man\nP-0\t-0.4 -0.1\n"
)
GENERATE_STDERR = (
    "INFO:fairseq_cli.generate:NOTE: hypothesis and token scores are output in base 2\n"
    "INFO:fairseq_cli.generate:Translated 1,000 sentences (13,532 tokens) in 7.3s "
    "(137.00 sentences/s, 1853.70 tokens/s)\n"
)


def test_hypotheses_are_read_in_sentence_order():
    assert fairseq_tools.detokenized_hypotheses(GENERATE_STDOUT, 2) == ["A man", "Two dogs"]
    with pytest.raises(fairseq_tools.CommandError, match="no hypothesis for 1 of 3"):
        fairseq_tools.detokenized_hypotheses(GENERATE_STDOUT, 3)


def test_generates_timer_line_is_parsed():
    match = fairseq_tools._TRANSLATED.search(GENERATE_STDERR)
    assert match.group(1) == "1,000" and float(match.group(3)) == 137.0


def test_search_arguments_are_fairseqs_names_for_the_same_search():
    config = SearchConfig(beam_size=4, max_len_a=1.2, max_len_b=10, length_penalty=0.6)
    arguments = fairseq_tools.search_arguments(config)
    assert "--beam=4" in arguments and "--max-len-a=1.2" in arguments
    assert "--max-len-b=10" in arguments and "--lenpen=0.6" in arguments
    assert "--min-len=1" in arguments and "--cpu" in arguments


def _comparison(**results):
    return types.SimpleNamespace(
        batch_size=128,
        results={"sentences": 3, "latency_sentences": 2, **results},
        translations={
            "fairseq-generate": ["a", "b", "c"],
            "in-process float32": ["a", "x", "c"],
            "fresh SavedModel": ["a", "x", "c"],
        },
    )


def test_ratios_are_above_one_when_this_project_is_faster():
    comparison = _comparison(
        in_process_float32_batch_sentences_per_sec=300.0,
        fairseq_batch_sentences_per_sec=150.0,
        saved_model_batch1_mean_ms=20.0,
        fairseq_batch1_ms=60.0,
        translate_all_seconds=10.0,  # no fairseq counterpart measured: no row
    )
    summary = fairseq_tools.summary(comparison)
    assert summary["ratio_in_process_float32_batch_sentences_per_sec"] == 2.0
    assert summary["ratio_saved_model_batch1_mean_ms"] == 3.0
    assert "ratio_translate_all_seconds" not in summary
    assert summary["identical_fairseq-generate_vs_in-process_float32"] == 2
    assert summary["identical_in-process_float32_vs_fresh_SavedModel"] == 3
    table = fairseq_tools.table(comparison)
    assert "| in-process float32, batch 128, sentences/s (fairseq-generate) | 300.00 |" in table
    assert "| 2.00x |" in table and "| 3.00x |" in table
    assert "fairseq-generate vs in-process float32: 2 of 3" in table


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_the_comparison_end_to_end(tiny_run, capsys):
    options = flags.FlagValues()
    compare_fairseq.define_flags(options)
    options(
        [
            "benchmark",
            f"--model_dir={tiny_run}",
            "--sentences=6",
            "--latency_sentences=2",
            "--batch_size=4",
            "--in_process_dtypes=float32",
            "--max_len_b=10",
            # A fresh export's process is benchmarks.translate_speed's, smoke-tested in
            # tests/test_benchmarks.py.
            "--skip=saved_model",
        ]
    )
    compare_fairseq.run(options)
    output = capsys.readouterr().out
    line = json.loads(output.strip().splitlines()[-1])
    assert (line["sentences"], line["latency_sentences"], line["batch_size"]) == (6, 2, 4)
    for key in (
        "fairseq_batch_sentences_per_sec",
        "in_process_float32_batch_sentences_per_sec",
        "translate_all_seconds",
        "interactive_all_seconds",
    ):
        assert line[key] > 0, key
    # The same model and search: fairseq and this project translate alike.
    assert line["identical_fairseq-generate_vs_in-process_float32"] == 6
    assert line["identical_fairseq-interactive_vs_pipelines.translate"] == 6
    assert not any(key.startswith("saved_model_") for key in line)
    assert line["ratio_in_process_float32_batch_sentences_per_sec"] > 0
    assert "| in-process float32, batch 4, sentences/s (fairseq-generate) |" in output
