"""In-graph tokenizer: round trip, decoding rules, piece lookup, tf.function and SavedModel."""

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from convs2s_tf import vocabulary
from convs2s_tf.data.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer(small_prepared):
    return Tokenizer(small_prepared.data.sentencepiece_model_path)


def normalised(processor, text):
    """SentencePiece's normalisation (nmt_nfkc) of `text`, as plain text."""
    return processor.normalize(text).replace("\u2581", " ").strip()


def test_round_trip_returns_the_normalised_text(small_prepared, tokenizer):
    processor = spm.SentencePieceProcessor(model_file=small_prepared.data.sentencepiece_model_path)
    lines = []
    for path in small_prepared.data.split_paths("train"):
        lines += open(path, encoding="utf-8").read().splitlines()
    lines += ["  Zwei   Männer\u3000mit ﬁ-Ligatur ", "Ⅱ full-width ｄｏｇｓ"]
    ids = tokenizer.encode(tf.constant(lines))
    decoded = [text.decode("utf-8") for text in tokenizer.decode(ids).numpy()]
    expected = [normalised(processor, line) for line in lines]
    assert decoded == expected
    # The cleaned training text is already normal: it comes back unchanged.
    assert decoded[:100] == lines[:100]
    # The in-graph ids are SentencePiece's own.
    assert ids.to_list()[:50] == processor.encode(lines[:50])


def test_decode_cuts_at_eos_and_skips_pads_and_invalid_ids(tokenizer):
    ids = tokenizer.encode(tf.constant(["A dog runs .", "Ein Hund ."])).to_list()
    dog, hund = ids
    dense = np.full((3, 12), vocabulary.PAD_ID, np.int32)
    dense[0, : len(dog) + 3] = dog + [vocabulary.EOS_ID] + hund[:2]
    dense[1, 0] = vocabulary.BOS_ID
    dense[1, 1 : len(hund) + 1] = hund
    dense[1, len(hund) + 1] = -1
    dense[1, len(hund) + 2] = tokenizer.vocab_size + 5
    dense[2, 0] = vocabulary.EOS_ID
    assert tokenizer.decode(tf.constant(dense)).numpy().tolist() == [
        b"A dog runs .",
        b"Ein Hund .",
        b"",
    ]
    ragged = tf.ragged.constant([dog + [vocabulary.EOS_ID], hund])
    assert tokenizer.decode(ragged).numpy().tolist() == [b"A dog runs .", b"Ein Hund ."]
    assert tokenizer.decode(tf.constant(hund + [vocabulary.EOS_ID, 7])).numpy() == b"Ein Hund ."


def test_encode_with_eos_and_pieces(tokenizer):
    ids = tokenizer.encode_with_eos(tf.constant(["A dog .", ""]))
    assert ids.to_list()[1] == [vocabulary.EOS_ID]
    assert ids.to_list()[0][-1] == vocabulary.EOS_ID
    pieces = tokenizer.id_to_piece(tf.constant([[0, 1, 2, 3, -1, tokenizer.vocab_size]]))
    assert pieces.numpy().tolist() == [[b"<s>", b"<pad>", b"</s>", b"<unk>", b"<unk>", b"<unk>"]]
    ragged_pieces = tokenizer.id_to_piece(tokenizer.encode(tf.constant(["A dog ."])))
    assert (
        b"".join(ragged_pieces.flat_values.numpy()).decode().replace("\u2581", " ").strip()
        == "A dog ."
    )
    assert tokenizer.piece_to_id(tf.constant("</s>")).numpy() == vocabulary.EOS_ID


def test_works_in_tf_function_and_savedmodel(tokenizer, tmp_path):
    module = tf.Module()
    module.tokenizer = tokenizer
    module.round_trip = tf.function(
        lambda texts: tokenizer.decode(tokenizer.encode_with_eos(texts)),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    texts = tf.constant(["Ein Hund rennt .", "A man sits ."])
    assert module.round_trip(texts).numpy().tolist() == [b"Ein Hund rennt .", b"A man sits ."]
    tf.saved_model.save(module, str(tmp_path / "saved"))
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    assert restored.round_trip(texts).numpy().tolist() == [b"Ein Hund rennt .", b"A man sits ."]


def test_model_bytes_or_path_but_not_both(small_prepared):
    proto = open(small_prepared.data.sentencepiece_model_path, "rb").read()
    assert Tokenizer(model_proto=proto).vocab_size == 500
    with pytest.raises(ValueError):
        Tokenizer()
    with pytest.raises(ValueError):
        Tokenizer(small_prepared.data.sentencepiece_model_path, model_proto=proto)


def test_survives_global_seeding_after_creation(small_prepared):
    # tf-text's kernel-owned resource vanished when set_seed cleared the kernel cache.
    fresh = Tokenizer(small_prepared.data.sentencepiece_model_path)
    before = fresh.encode(tf.constant(["A dog ."])).to_list()
    tf.random.set_seed(3)
    import keras

    keras.utils.set_random_seed(4)
    assert fresh.encode(tf.constant(["A dog ."])).to_list() == before
    assert fresh.decode(tf.ragged.constant(before)).numpy().tolist() == [b"A dog ."]
