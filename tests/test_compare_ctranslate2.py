"""benchmarks.compare.ctranslate2 end to end on the tiny run, with the smallest settings:
a fairseq Transformer trained for seconds, converted by CTranslate2 and timed beside the
run's export; every step's output checked, not the figures."""

import json

import pytest
from absl import flags

from benchmarks.compare import ctranslate2


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_compare_ctranslate2(tiny_run, tmp_path, capsys):
    work_dir = tmp_path / "work"
    arguments = [
        "benchmark",
        f"--model_dir={tiny_run}",
        f"--work_dir={work_dir}",
        # Two epochs, however slow the machine (a time limit alone could end before the
        # first epoch's checkpoint on a busy one).
        "--train_minutes=10",
        "--max_epochs=2",
        "--sentences=8",
        "--latency_sentences=2",
        "--batch_size=4",
        # PyTorch's threads wait for each other when other processes take the cores.
        "--threads=1",
        "--translators=transformer_ct2_int8",
        "--translators=convs2s_float32",
        # Without the compiled small-batch buckets (tests/test_export.py tests them).
        "--export_flags=--noxla_small_batches",
    ]
    options = flags.FlagValues()
    ctranslate2.define_flags(options)
    options(arguments)
    ctranslate2.run(options)
    stdout = capsys.readouterr().out
    line = json.loads(stdout.strip().splitlines()[-1])
    transformer = line["transformer"]
    assert transformer["epochs"] == 2 and transformer["parameters"] > 0
    assert transformer["averaged_epochs"] == [1, 2]
    assert set(line["translators"]) == {"transformer_ct2_int8", "convs2s_float32"}
    for figures in line["translators"].values():
        assert figures["batch1_mean_ms"] > 0 and figures["batch_sentences_per_sec"] > 0
        assert figures["peak_rss_mb"] > 0 and figures["size_mb"] > 0
        assert 0 <= figures["bleu"] <= 100
    assert (work_dir / "ctranslate2" / "int8" / "model.bin").is_file()
    assert len((work_dir / "translations" / "convs2s_float32.txt").read_text().splitlines()) == 8
    assert "| transformer_ct2_int8 |" in stdout and line["cpu"] in stdout
