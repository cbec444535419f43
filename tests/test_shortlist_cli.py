"""pipelines.build_shortlist, and --shortlist in translate and export: the shortlist is
learnt from the run's training text (or a user's text for an imported run), stored with
the run, carried into exports with core TF ops only, and refused with a clear message
when missing or made for another vocabulary."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf
from conftest import SEARCH_FLAGS, run_python
from helpers.in_process import run_in_process

from convs2s_tf.decoding import beam_search
from convs2s_tf.inference import load_inference_model, open_translator
from convs2s_tf.shortlist import (
    Shortlist,
    ShortlistError,
    ShortlistTable,
    build_shortlist,
    shortlist_path,
)
from convs2s_tf.shortlist.building import pair_encoder
from convs2s_tf.vocabulary import PAD_ID

from .test_export import SEARCH_CONFIG, TEXTS


@pytest.fixture(scope="module")
def shortlisted_run(tiny_run, tmp_path_factory):
    """A copy of the tiny run with a shortlist built by the pipeline."""
    model_dir = tmp_path_factory.mktemp("shortlisted") / "run"
    shutil.copytree(tiny_run, model_dir)
    result = run_in_process(
        [
            "-m",
            "pipelines.build_shortlist",
            f"--model_dir={model_dir}",
            "--shortlist_top_k=3",
            "--shortlist_frequent=12",
        ]
    )
    assert "3 target pieces per source piece and the 12 most frequent" in result.stdout
    return model_dir


def test_the_pipeline_writes_the_runs_shortlist(shortlisted_run):
    shortlist = Shortlist.load(shortlist_path(str(shortlisted_run)))
    assert (shortlist.k, shortlist.n, shortlist.top_targets.shape[0]) == (3, 12, 500)
    assert shortlist.metadata["pairs"] > 1900 and shortlist.metadata["method"] == "ibm_model_1"
    assert shortlist.metadata["source_file"].endswith("train.en")


@pytest.mark.slow  # over ten seconds on 2 cores
def test_translate_decodes_against_the_batchs_candidates(shortlisted_run):
    path = shortlist_path(str(shortlisted_run))
    loaded = load_inference_model(str(shortlisted_run), search_config=SEARCH_CONFIG, shortlist=path)
    texts = TEXTS[:2]
    source = loaded.tokenizer.encode_with_eos(tf.constant(texts)).to_tensor(PAD_ID)
    output = beam_search(
        loaded.model,
        source,
        SEARCH_CONFIG.replace(nbest=3),
        shortlist=ShortlistTable(loaded.shortlist),
    )
    allowed = set(loaded.shortlist.candidate_ids(source.numpy()))
    assert set(output.tokens.numpy().ravel()) <= allowed
    expected = [row[0][0] for row in loaded.translator(warm_up=False).translate(texts)]
    assert expected == [
        text.decode() for text in loaded.tokenizer.decode(output.tokens[:, 0]).numpy()
    ]
    result = run_in_process(
        [
            "-m",
            "pipelines.translate",
            f"--model_dir={shortlisted_run}",
            "--shortlist",
            *SEARCH_FLAGS,
        ],
        stdin="".join(text + "\n" for text in texts),
    )
    assert result.stdout.splitlines() == expected


@pytest.mark.slow  # an export, then its ops read in a fresh process
def test_export_carries_the_shortlist_with_core_ops(shortlisted_run, tmp_path, fork_server):
    export_dir = tmp_path / "shortlisted"
    run_in_process(
        [
            "-m",
            "pipelines.export",
            f"--model_dir={shortlisted_run}",
            f"--export_dir={export_dir}",
            "--shortlist",
            *SEARCH_FLAGS,
        ]
    )
    result = run_python(
        ["-m", "tests.helpers.saved_model_checks", "load", str(export_dir / "1")],
        stdin=json.dumps(TEXTS),
        fork_server=fork_server,
    )
    served = json.loads(result.stdout.strip().splitlines()[-1])["serving_default"]
    in_process = open_translator(
        model_dir=str(shortlisted_run),
        search_config=SEARCH_CONFIG,
        shortlist=shortlist_path(str(shortlisted_run)),
    ).translate(TEXTS)
    assert served["translation"] == [hypotheses[0][0] for hypotheses in in_process]
    np.testing.assert_allclose(served["score"], [h[0][1] for h in in_process], atol=1e-5)
    ops = run_python(
        ["-m", "tests.helpers.saved_model_checks", "ops", str(export_dir / "1")],
        fork_server=fork_server,
    )
    assert json.loads(ops.stdout.strip().splitlines()[-1])["other"] == []


def test_a_missing_or_foreign_shortlist_is_a_clear_error(tiny_run, tmp_path):
    with pytest.raises(
        ShortlistError, match="shortlist.npz not found: build it with python -m pipelines.build"
    ):
        open_translator(model_dir=str(tiny_run), shortlist=shortlist_path(str(tiny_run)))
    foreign = Shortlist(np.zeros([7, 2], np.int32), np.array([4]), target_vocab_size=9)
    path = foreign.save(str(tmp_path / "foreign.npz"))
    with pytest.raises(ShortlistError, match="built for 7 source and 9 target ids, but the model"):
        open_translator(model_dir=str(tiny_run), shortlist=path)
    (tmp_path / "corrupt.npz").write_bytes(b"not a zip")
    with pytest.raises(ShortlistError, match="corrupt.npz is not readable"):
        Shortlist.load(str(tmp_path / "corrupt.npz"))


def test_an_imported_runs_shortlist_comes_from_its_dictionaries_and_given_text(tmp_path):
    from convs2s_tf.interop.fairseq_dictionary import Dictionary

    run = tmp_path / "imported"
    run.mkdir()
    Dictionary.from_tokens(["a", "b", "c"]).save(str(run / "source_dict.txt"))
    Dictionary.from_tokens(["x", "y", "z", "w"]).save(str(run / "target_dict.txt"))
    config = {
        "model": {"source_vocab_size": 7, "target_vocab_size": 8},
        "vocabulary": {
            "format": "fairseq_dictionary",
            "source": "source_dict.txt",
            "target": "target_dict.txt",
        },
    }
    (run / "config.json").write_text(json.dumps(config))
    encoder = pair_encoder(str(run))
    assert encoder.encode_source("a c q") == [4, 6, 3]
    assert encoder.encode_target("w x") == [7, 4]
    with pytest.raises(ShortlistError, match="names no prepared data"):
        build_shortlist(str(run), k=1, n=1)
    (tmp_path / "train.src").write_text("a b\nb c\nb\n" * 5)
    (tmp_path / "train.tgt").write_text("x y\ny z\ny\n" * 5)
    shortlist = build_shortlist(
        str(run), k=1, n=1, source_file=tmp_path / "train.src", target_file=tmp_path / "train.tgt"
    )
    # a -> x, b -> y, c -> z; y is the most frequent.
    assert shortlist.top_targets[[4, 5, 6], 0].tolist() == [4, 5, 6]
    assert shortlist.frequent.tolist() == [5]
