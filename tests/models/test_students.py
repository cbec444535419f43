"""Distilled students are ConvS2S models like any other: the `multi30k_student_*` presets
(a deep encoder, one or two narrow decoder blocks of 5 taps) and a student of that shape
at test size through incremental search, compiled buckets, batch mates, in-process
translation and evaluation, shortlists, ensembles of students and both exports with
their warm-up. fairseq's parity for the shape: tests/test_fairseq_export.py ("student")."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf
from helpers.in_process import run_in_process
from helpers.models import randomize_weights, write_random_run
from helpers.recompute_search import recompute_beam_search

from convs2s_tf.decoding import SearchConfig, beam_search
from convs2s_tf.decoding.compiled_search import BucketedSearch, SearchBuckets
from convs2s_tf.inference import open_saved_model, open_translator
from convs2s_tf.interop.fairseq_export import fairseq_architecture
from convs2s_tf.layers import fold_kernels
from convs2s_tf.models import ConvS2S, get_preset, list_presets, parse_layer_spec

STUDENT_PRESETS = [name for name in list_presets() if name.startswith("multi30k_student")]
# A student at test size: four encoder blocks, one decoder block half as wide, 5 taps.
STUDENT = dict(
    embed_dim=16,
    encoder_layers="[(16, 3)] * 4",
    decoder_layers="[(8, 5)]",
    decoder_out_embed_dim=16,
    share_decoder_input_output_embed=True,
    max_source_positions=64,
    max_target_positions=64,
)
SEARCH = ["--beam_size=2", "--max_len_a=1.2", "--max_len_b=5"]
TEXTS = ["A man is riding a bicycle.", "Two dogs play in the snow.", "", "A dog runs."]


def _student(vocab_size, seed):
    model = ConvS2S(source_vocab_size=vocab_size, target_vocab_size=vocab_size, **STUDENT)
    model(model.dummy_inputs())
    randomize_weights(model, seed=seed, scale=0.5)
    return model


def _decoder_block_weights(model):
    return sum(
        int(np.prod(weight.shape))
        for weight in model.decoder.trainable_weights
        if not any(part in weight.path for part in ("_embedding/", "output_projection/"))
    )


@pytest.mark.parametrize("name", STUDENT_PRESETS)
def test_student_presets_are_deeper_encoders_over_smaller_decoders(name):
    student, teacher = get_preset(name), get_preset("multi30k_cpu")
    layers = {key: parse_layer_spec(student[key]) for key in ("encoder_layers", "decoder_layers")}
    teacher_encoder = parse_layer_spec(teacher["encoder_layers"])
    assert len(layers["encoder_layers"]) > len(teacher_encoder)
    assert len(layers["decoder_layers"]) <= 2 and student["embed_dim"] == teacher["embed_dim"]
    models = [ConvS2S.from_preset(preset, 8000, 8000) for preset in (name, "multi30k_cpu")]
    for model in models:
        model(model.dummy_inputs())
    # What each generated token multiplies by besides the tables and the output projection.
    assert _decoder_block_weights(models[0]) < _decoder_block_weights(models[1]) * 0.6
    assert fairseq_architecture(models[0].get_config()) == "fconv"


@pytest.mark.parametrize("beam_size", [1, 3])
def test_incremental_search_equals_recomputation_and_ignores_batch_mates(beam_size):
    model = _student(20, seed=4)
    config = SearchConfig(beam_size=beam_size, max_len_a=1.5, max_len_b=3)
    sentence = [5, 6, 7, 8, 2]
    batch = tf.constant([[1] * 3 + sentence, [9, 10, 11, 12, 13, 14, 15, 2], sentence + [1] * 3])
    found = beam_search(model, batch, config)
    recomputed = tf.function(lambda source: recompute_beam_search(model, source, config))(batch)
    np.testing.assert_array_equal(found.tokens.numpy(), recomputed.tokens.numpy())
    alone = beam_search(model, tf.constant([sentence]), config)
    length = int(alone.lengths[0, 0])
    for row in (0, 2):
        np.testing.assert_array_equal(
            found.tokens[row, 0, :length].numpy(), alone.tokens[0, 0, :length].numpy()
        )
    # The compiled bucket of 4 (a row of padding) finds what graph mode finds.
    buckets = SearchBuckets(batch_sizes=(4,), source_length=8)
    bucketed = BucketedSearch(model, config, buckets, kernels=fold_kernels(model))
    compiled = tf.function(lambda source: bucketed(source).tokens)(batch)
    np.testing.assert_array_equal(compiled.numpy(), found.tokens[:, :1].numpy())


@pytest.fixture(scope="module")
def student_runs(small_prepared, tmp_path_factory):
    """Two run directories of random students over the small corpus' vocabulary (an
    ensemble's members), as pipelines.train writes them."""
    vocab_size = small_prepared.summary["vocab_size"]
    return [
        write_random_run(
            tmp_path_factory.mktemp(f"student_{seed}"), _student(vocab_size, seed), small_prepared
        )
        for seed in (1, 2)
    ]


@pytest.mark.slow  # four pipelines and a shortlist, in process
def test_translate_evaluate_shortlists_and_ensembles_of_students(student_runs, tmp_path):
    first, second = map(str, student_runs)
    stdin = "\n".join(TEXTS) + "\n"
    alone = run_in_process(["-m", "pipelines.translate", f"--model_dir={first}", *SEARCH], stdin)
    assert len(alone.stdout.splitlines()) == len(TEXTS)
    ensemble = ["-m", "pipelines.translate", f"--model_dir={first},{second}", *SEARCH]
    assert len(run_in_process(ensemble, stdin).stdout.splitlines()) == len(TEXTS)
    scores = run_in_process(["-m", "pipelines.evaluate", f"--model_dir={first}", *SEARCH, "--json"])
    assert 0 <= json.loads(scores.stdout.splitlines()[-1])["bleu"] <= 100
    shortlisted = tmp_path / "shortlisted"
    shutil.copytree(first, shortlisted)
    run_in_process(["-m", "pipelines.build_shortlist", f"--model_dir={shortlisted}"])
    translate = ["-m", "pipelines.translate", f"--model_dir={shortlisted}", *SEARCH]
    assert len(run_in_process([*translate, "--shortlist"], stdin).stdout.splitlines()) == 4


@pytest.mark.slow  # an export, loaded with its warm-up
def test_the_export_translates_as_the_checkpoint(student_runs, tmp_path):
    # The compiled buckets here; a graph-mode export (--noxla_small_batches) of a student's
    # shape, loaded with its warm-up in a fresh process: tests/test_compare_ctranslate2.py.
    run = str(student_runs[0])
    run_in_process(
        ["-m", "pipelines.export", f"--model_dir={run}", f"--export_dir={tmp_path}", *SEARCH]
    )
    assert (tmp_path / "1" / "assets.extra" / "tf_serving_warmup_requests").is_file()
    served = open_saved_model(str(tmp_path))  # replays the warm-up, as TF Serving does
    config = SearchConfig(beam_size=2, max_len_a=1.2, max_len_b=5)
    checkpoint = open_translator(model_dir=run, search_config=config, warm_up=False)
    for texts in (TEXTS, TEXTS[:1]):  # beyond the buckets, and one sentence
        assert [h[0][0] for h in served.translate(texts)] == [
            h[0][0] for h in checkpoint.translate(texts)
        ]
