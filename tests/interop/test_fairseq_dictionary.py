"""Tests of fairseq dictionaries (`dict.txt`), read as fairseq reads them (no PyTorch)."""

import pytest
from helpers.text_files import SPLITLINES_ONLY_BREAKS

from convs2s_tf.interop import Dictionary, DictionaryError


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


def _dictionary_file(tmp_path, character):
    path = tmp_path / "dict.txt"
    # '\r\n' endings, as a dict.txt edited on Windows has.
    path.write_bytes(f"the 9\r\nto{character}ken 5\r\n{character}x 3\r\nlast 1\r\n".encode())
    return str(path)


@pytest.mark.parametrize("character", SPLITLINES_ONLY_BREAKS)
def test_dictionary_token_keeps_the_line_count(tmp_path, character):
    dictionary = Dictionary.load(_dictionary_file(tmp_path, character))
    assert dictionary.symbols[4:] == ["the", f"to{character}ken", f"{character}x", "last"]
    assert dictionary.counts[4:] == [9, 5, 3, 1]


@pytest.mark.parametrize("character", SPLITLINES_ONLY_BREAKS)
def test_dictionary_reads_such_tokens_as_fairseq(tmp_path, character):
    # fairseq's Dictionary.add_from_file reads readlines() of a text-mode file, which
    # does not break at these characters either: the ids must be the same.
    fairseq_data = pytest.importorskip("fairseq.data")
    path = _dictionary_file(tmp_path, character)
    assert Dictionary.load(path).symbols == fairseq_data.Dictionary.load(path).symbols


def test_dictionary_breaks_at_a_lone_carriage_return_as_fairseq(tmp_path):
    # Universal newlines (fairseq's reading) end a line at a lone '\r' too; matching
    # fairseq matters more here than '\n'-only splitting, so this file is refused alike.
    path = tmp_path / "dict.txt"
    path.write_bytes(b"a\rb 5\n")
    with pytest.raises(ValueError, match="line 1"):
        Dictionary.load(str(path))
    fairseq_data = pytest.importorskip("fairseq.data")
    with pytest.raises(ValueError, match="Incorrect dictionary format"):
        fairseq_data.Dictionary.load(str(path))
