"""The parts of benchmarks.compare_fairseq that read fairseq's output and report, on
fairseq's own output format (no timing, no fairseq run: the benchmark runs those)."""

import types

import pytest

from benchmarks import comparison_report, fairseq_commands
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
    assert fairseq_commands.detokenized_hypotheses(GENERATE_STDOUT, 2) == ["A man", "Two dogs"]
    with pytest.raises(fairseq_commands.CommandError, match="no hypothesis for 1 of 3"):
        fairseq_commands.detokenized_hypotheses(GENERATE_STDOUT, 3)


def test_generates_timer_line_is_parsed():
    match = fairseq_commands._TRANSLATED.search(GENERATE_STDERR)
    assert match.group(1) == "1,000" and float(match.group(3)) == 137.0


def test_search_arguments_are_fairseqs_names_for_the_same_search():
    config = SearchConfig(beam_size=4, max_len_a=1.2, max_len_b=10, length_penalty=0.6)
    arguments = fairseq_commands.search_arguments(config)
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
    summary = comparison_report.summary(comparison)
    assert summary["ratio_in_process_float32_batch_sentences_per_sec"] == 2.0
    assert summary["ratio_saved_model_batch1_mean_ms"] == 3.0
    assert "ratio_translate_all_seconds" not in summary
    assert summary["identical_fairseq-generate_vs_in-process_float32"] == 2
    assert summary["identical_in-process_float32_vs_fresh_SavedModel"] == 3
    table = comparison_report.table(comparison)
    assert "| in-process float32, batch 128, sentences/s (fairseq-generate) | 300.00 |" in table
    assert "| 2.00x |" in table and "| 3.00x |" in table
    assert "fairseq-generate vs in-process float32: 2 of 3" in table
