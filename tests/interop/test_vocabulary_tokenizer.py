"""Tests of the vocabulary tokenizer of imported models and of a run's vocabularies."""

import pytest
import tensorflow as tf

from convs2s_tf.interop import Dictionary, VocabularyError, VocabularyTokenizer, tokenizer_for_run


def test_pretokenized_vocabulary_tokenizer():
    tokenizer = VocabularyTokenizer(
        Dictionary.from_tokens(["a", "b@@", "c"]), Dictionary.from_tokens(["x", "y@@", "z"])
    )
    assert tokenizer.pretokenized and tokenizer.vocab_size == 7
    texts = ["a b@@ c", "  c\tunknown <pad> </s> ", "", "a\u00a0c\u3000b@@"]
    ids = tokenizer.encode(tf.constant(texts))
    assert ids.to_list() == [[4, 5, 6], [6, 3, 3, 3], [], [4, 6, 5]]
    assert ids.to_list() == [
        Dictionary.from_tokens(["a", "b@@", "c"]).encode_line(t) for t in texts
    ]

    @tf.function
    def decode(ids):
        return tokenizer.decode(ids)

    # Cut at </s>; <pad> and <s> dropped; ids outside the vocabulary shown as <unk>.
    output = decode(tf.constant([[4, 5, 6, 2, 4], [0, 6, 1, 99, 3], [2, 4, 4, 4, 4]]))
    assert output.numpy().tolist() == [b"x y@@ z", b"z <unk> <unk>", b""]
    assert tokenizer.decode(tf.constant([5, 4, 2])).numpy() == b"y@@ x"
    assert tokenizer.id_to_piece(tf.constant([4, 7])).numpy().tolist() == [b"x", b"<unk>"]
    assert tokenizer.source_id_to_piece(tf.constant([4])).numpy().tolist() == [b"a"]


def test_run_vocabularies_must_match_the_model(tmp_path):
    for name in ("src.txt", "tgt.txt"):
        (tmp_path / name).write_text("a 1\nb 1\n")
    run_config = {
        "model": {"source_vocab_size": 6, "target_vocab_size": 7},
        "vocabulary": {"format": "fairseq_dictionary", "source": "src.txt", "target": "tgt.txt"},
        "sentencepiece_model": None,
    }
    with pytest.raises(VocabularyError, match=r"target vocabulary \S*tgt.txt .* 6 tokens .* 7"):
        tokenizer_for_run(str(tmp_path), run_config)
    run_config["model"]["target_vocab_size"] = 6
    assert tokenizer_for_run(str(tmp_path), run_config).pretokenized
