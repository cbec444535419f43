"""pipelines.translate and pipelines.evaluate from a checkpoint and from a SavedModel."""

import json

import pytest
from conftest import SEARCH_FLAGS
from helpers.corpora import multi30k_lines
from helpers.in_process import run_in_process

# A U+2028 LINE SEPARATOR or a form feed inside a sentence does not end its line.
LINES = [
    "A man is riding a bicycle.",
    "Two dogs play\u2028in the snow.",
    "",
    "A girl\x0csmiles.",
]


def _lines(text):
    """`text`'s lines, ended by "\\n" only (as the pipelines write them)."""
    return text.split("\n")[:-1] if text else []


def _run(arguments, stdin=None):
    return run_in_process(["-m", *arguments], stdin, check=False)


@pytest.mark.slow  # attention images of an export
def test_translate_checkpoint_stdin_equals_saved_model_file(tiny_run, exported, tmp_path):
    from_checkpoint = _run(
        ["pipelines.translate", f"--model_dir={tiny_run}", "--batch_size=3", *SEARCH_FLAGS],
        stdin="\n".join(LINES) + "\n",
    )
    assert from_checkpoint.returncode == 0, from_checkpoint.stderr[-3000:]
    source = tmp_path / "source.txt"
    source.write_bytes(("\n".join(LINES) + "\n").encode("utf-8"))
    output = tmp_path / "out.txt"
    from_export = _run(
        [
            "pipelines.translate",
            f"--saved_model={exported}",
            f"--input={source}",
            f"--output={output}",
            f"--attention_dir={tmp_path / 'plots'}",
        ]
    )
    assert from_export.returncode == 0, from_export.stderr[-3000:]
    translations = _lines(output.read_text(encoding="utf-8"))
    assert len(translations) == len(LINES)
    assert translations == _lines(from_checkpoint.stdout)
    plots = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert plots == [f"attention_{i:06d}.png" for i in range(len(LINES))]
    assert (tmp_path / "plots" / plots[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_translate_nbest_and_flag_errors(tiny_run, exported):
    nbest = _run(
        ["pipelines.translate", f"--model_dir={tiny_run}", "--nbest=3", *SEARCH_FLAGS],
        stdin="A dog.\nA cat.\n",
    )
    assert nbest.returncode == 0, nbest.stderr[-3000:]
    rows = [line.split(" ||| ") for line in nbest.stdout.splitlines()]
    assert [row[0] for row in rows] == ["0", "0", "0", "1", "1", "1"]
    scores = [float(row[2]) for row in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    too_many = _run(["pipelines.translate", f"--model_dir={tiny_run}", "--nbest=9"], stdin="x\n")
    assert too_many.returncode != 0 and "--nbest=9 must be between 1 and --beam_size=5" in (
        too_many.stderr
    )
    fixed = _run(["pipelines.translate", f"--saved_model={exported}", "--beam_size=2"], "x\n")
    assert fixed.returncode != 0 and "fixed at export time" in fixed.stderr
    neither = _run(["pipelines.translate"], stdin="x\n")
    assert neither.returncode != 0 and "Give --saved_model=DIR or --model_dir=DIR" in (
        neither.stderr
    )


@pytest.mark.slow  # 44 searches with attention images
def test_length_sorted_batches_write_every_output_in_input_order(tiny_run, tmp_path):
    # Lines of many lengths: with --batch_size=3 they are translated in length-sorted
    # batches, with --batch_size=1 alone (in windows of 16 lines); translations, n-best
    # indices and attention files must name the same input lines either way.
    lines = multi30k_lines("test_2016_flickr", "en", 7) + ["", "A dog."]
    outputs = {}
    for batch_size in (1, 3):
        plots = tmp_path / f"plots_{batch_size}"
        result = _run(
            [
                "pipelines.translate",
                f"--model_dir={tiny_run}",
                f"--batch_size={batch_size}",
                "--nbest=2",
                f"--attention_dir={plots}",
                *SEARCH_FLAGS,
            ],
            stdin="".join(line + "\n" for line in lines),
        )
        assert result.returncode == 0, result.stderr[-3000:]
        pngs = {path.name: path.read_bytes() for path in plots.iterdir()}
        outputs[batch_size] = (result.stdout, pngs)
    rows = [line.split(" ||| ") for line in _lines(outputs[3][0])]
    assert [int(row[0]) for row in rows] == [index for index in range(len(lines)) for _ in "ab"]
    assert outputs[3][0] == outputs[1][0]
    assert sorted(outputs[3][1]) == [f"attention_{i:06d}.png" for i in range(len(lines))]
    assert outputs[3][1] == outputs[1][1]


@pytest.mark.slow  # over ten seconds on 2 cores
def test_evaluate_files_and_split(tiny_run, exported, small_prepared, tmp_path):
    source, reference = small_prepared.data.split_paths("test")
    files = _run(
        [
            "pipelines.evaluate",
            f"--saved_model={exported}",
            f"--source={source}",
            f"--reference={reference}",
            "--json",
        ]
    )
    assert files.returncode == 0, files.stderr[-3000:]
    scores = json.loads(files.stdout.strip().splitlines()[-1])
    assert scores["sentences"] == 200
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert 0.0 <= scores["bleu"] <= 100.0 and 0.0 <= scores["chrf"] <= 100.0
    split = _run(
        [
            "pipelines.evaluate",
            f"--model_dir={tiny_run}",
            f"--data_dir={small_prepared.data.data_dir}",
            "--split=test",
            *SEARCH_FLAGS,
        ]
    )
    assert split.returncode == 0, split.stderr[-3000:]
    assert f"BLEU {scores['bleu']:.2f}" in split.stdout
    assert "chrF" in split.stdout
    short = tmp_path / "short.txt"
    short.write_text("one line\n")
    mismatch = _run(
        [
            "pipelines.evaluate",
            f"--saved_model={exported}",
            f"--source={short}",
            f"--reference={reference}",
        ]
    )
    assert mismatch.returncode != 0 and "has 1 lines but" in mismatch.stderr
