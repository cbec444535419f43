"""fairseq dictionaries and the vocabulary tokenizer of imported models (no PyTorch)."""

import pytest
import tensorflow as tf

from convs2s_tf.interop import (
    Dictionary,
    DictionaryError,
    VocabularyError,
    VocabularyTokenizer,
    tokenizer_for_run,
)


def test_dictionary_reads_dict_txt_as_fairseq(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("the 100\nco@@ 50\n, 7\nthe 3 #fairseq:overwrite\nmadeupword0000 0\n")
    dictionary = Dictionary.load(str(path))
    assert dictionary.symbols == [
        *("<s>", "<pad>", "</s>", "<unk>"),
        *("the", "co@@", ",", "the", "madeupword0000"),
    ]
    assert len(dictionary) == 9 and dictionary.counts[4:] == [100, 50, 7, 3, 0]
    # A token repeated with the overwrite flag looks up its newer id.
    assert dictionary.index("the") == 7 and dictionary.index("unseen") == 3
    assert dictionary.encode_line("the  co@@ unseen </s> <pad>") == [7, 5, 3, 3, 3]
    assert dictionary.decode_ids([4, 5, 0, 1, 3, 2, 6]) == "the co@@ <unk>"
    dictionary.save(str(tmp_path / "copy.txt"))
    assert Dictionary.load(str(tmp_path / "copy.txt")).symbols == dictionary.symbols


@pytest.mark.parametrize(
    "content, message",
    [
        ("the 1\nthe 2\n", r"Duplicate token 'the' in .*line 2.*#fairseq:overwrite"),
        ("lonely\n", r"line 1: expected '<token> <count> \[flags\]'"),
        ("word many\n", r"line 1: the count 'many' is not an integer"),
    ],
)
def test_dictionary_refuses_what_fairseq_refuses(tmp_path, content, message):
    path = tmp_path / "dict.txt"
    path.write_text(content)
    with pytest.raises(DictionaryError, match=message):
        Dictionary.load(str(path))


def test_dictionary_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt does not exist"):
        Dictionary.load(str(tmp_path / "nope.txt"))


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
    with pytest.raises(VocabularyError, match=r"target vocabulary tgt.txt .* 6 tokens .* 7"):
        tokenizer_for_run(str(tmp_path), run_config)
    run_config["model"]["target_vocab_size"] = 6
    assert tokenizer_for_run(str(tmp_path), run_config).pretokenized
