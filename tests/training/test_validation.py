"""Tests of validation during training: the loss, translations and attention images."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers.reference_losses import token_losses
from helpers.summaries import RecordingSummaries
from helpers.synthetic import make_batch, model_fn

from convs2s_tf.training import TrainingConfig
from convs2s_tf.training.coordination import Preempted
from convs2s_tf.training.validation import Validator
from convs2s_tf.vocabulary import EOS_ID, PAD_ID


class _IdTokenizer:
    """Token id `i` is the piece `t<i>`; text is pieces joined by spaces."""

    def decode(self, ids):
        lines = []
        for row in np.asarray(ids):
            pieces = []
            for token in row:
                if token == EOS_ID:
                    break
                if token != PAD_ID:
                    pieces.append(f"t{token}")
            lines.append(" ".join(pieces))
        return tf.constant(lines)

    def id_to_piece(self, ids):
        return tf.constant([f"t{i}" for i in ids], tf.string)


def _valid_dataset(sentences=6):
    batch = make_batch(np.random.default_rng(3), sentences)
    text = _IdTokenizer().decode(batch["source"])
    return tf.data.Dataset.from_tensors({**batch, "source_text": text, "reference_text": text})


@pytest.fixture(scope="module")
def model():
    model = model_fn()
    model(model.dummy_inputs())
    return model


def test_validation_loss_is_the_reference_loss(model):
    summaries = RecordingSummaries()
    config = TrainingConfig(valid_beam_size=0, label_smoothing=0.1)
    results = Validator(model, config, summaries).validate(_valid_dataset(), step=3)
    batch = next(iter(_valid_dataset()))
    logits = model({"source": batch["source"], "target_input": batch["target_input"]})
    loss, nll, tokens = token_losses(logits, batch["target"], label_smoothing=0.1)
    assert results["valid_loss"] == pytest.approx(float(loss / tokens), rel=1e-5)
    assert results["valid_nll"] == pytest.approx(float(nll / tokens), rel=1e-5)
    assert results["valid_perplexity"] == pytest.approx(math.exp(results["valid_nll"]))
    assert "valid_bleu" not in results and not summaries.translation_calls
    assert summaries.scalar_calls == [
        ("valid", 3, {"loss": results["valid_loss"], "perplexity": results["valid_perplexity"]})
    ]


@pytest.mark.slow  # over ten seconds on 2 cores
def test_validation_translates_and_plots_attention(model):
    summaries = RecordingSummaries()
    config = TrainingConfig(
        valid_beam_size=2, valid_bleu_sentences=5, sample_sentences=3, attention_sentences=2
    )
    validator = Validator(model, config, summaries, tokenizer=_IdTokenizer())
    results = validator.validate(_valid_dataset(), step=9)
    assert "valid_bleu" in results and results["valid_bleu_signature"]
    ((split, step, sources, hypotheses, count),) = summaries.translation_calls
    assert (split, step, len(sources), len(hypotheses), count) == ("valid", 9, 5, 5, 3)
    assert summaries.scalar_calls[-1][2]["bleu"] == results["valid_bleu"]
    # Two sentences, two decoder blocks with attention: one image each, target by source.
    tags = [tag for tag, _, _, _ in summaries.images]
    assert tags == [f"attention/sentence_{s}/block_{b}" for s in range(2) for b in range(2)]
    for _, shape, source_length, target_length in summaries.images:
        assert shape == (target_length, source_length)
    workers = RecordingSummaries()
    Validator(model, config, workers, tokenizer=_IdTokenizer(), is_chief=False).validate(
        _valid_dataset(), step=9
    )
    assert not workers.translation_calls and not workers.images


def test_attention_sentences_span_batches(model):
    # A length bucket's batch can hold fewer sentences than are plotted: the next batch's
    # sentences follow, each plotted over its own source pieces.
    first, second = _valid_dataset(sentences=1), _valid_dataset(sentences=4)
    summaries = RecordingSummaries()
    config = TrainingConfig(valid_beam_size=2, valid_bleu_sentences=5, attention_sentences=3)
    Validator(model, config, summaries, tokenizer=_IdTokenizer()).validate(
        first.concatenate(second), step=2
    )
    tags = [tag for tag, _, _, _ in summaries.images]
    assert tags == [f"attention/sentence_{s}/block_{b}" for s in range(3) for b in range(2)]
    sources = [next(iter(first))["source"][0]] + list(next(iter(second))["source"][:2])
    source_lengths = [int(np.sum(source.numpy() != PAD_ID)) for source in sources]
    assert [source_length for _, _, source_length, _ in summaries.images[::2]] == source_lengths


def test_a_stop_request_abandons_the_pass_between_its_batches(model):
    # Asked to stop after the first batch's loss: the second batch's search and loss are
    # never run, nothing is logged.
    config = TrainingConfig(valid_beam_size=2, valid_bleu_sentences=0, attention_sentences=2)
    validator = Validator(model, config, RecordingSummaries(), tokenizer=_IdTokenizer())
    searched = []
    search = validator._search
    validator._search = lambda source: searched.append(1) or search(source)
    checks = []

    def stop_at_the_second_check():
        checks.append(1)
        return len(checks) >= 2

    with pytest.raises(Preempted):
        validator.validate(
            _valid_dataset().concatenate(_valid_dataset()),
            step=1,
            should_stop=stop_at_the_second_check,
        )
    assert len(checks) == 2 and searched == []
    assert not validator.summaries.scalar_calls and not validator.summaries.translation_calls
