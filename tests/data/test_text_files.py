"""One line per '\\n', whatever the text holds: `split_lines`, `read_lines`, local corpora
and fairseq dictionaries keep characters that `str.splitlines()` breaks at inside a line.

`str.splitlines()` also ends lines at '\\r', '\\x0b', '\\x0c', '\\x1c'-'\\x1e', U+0085, U+2028
and U+2029; a sentence holding one would become two lines and shift every later
translation against its source.
"""

import gzip

import pytest

from convs2s_tf.data.errors import InvalidUtf8Error
from convs2s_tf.data.sources import LocalFilesSource
from convs2s_tf.data.text_files import LineDecoder, read_lines, split_lines
from convs2s_tf.interop import Dictionary

# Every character at which str.splitlines() breaks but a '\n'-separated text file does not.
SPLITLINES_ONLY_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def test_splitlines_breaks_at_every_character_tested():
    # Guards the premise: each character really is a line break for str.splitlines().
    for character in SPLITLINES_ONLY_BREAKS:
        assert len(f"a{character}b".splitlines()) == 2, repr(character)


@pytest.mark.parametrize(
    "text, lines",
    [
        ("a\nb\n", ["a", "b"]),
        ("a\nb", ["a", "b"]),
        ("", []),
        ("\n", [""]),
        ("a\n\nb", ["a", "", "b"]),
        ("a\n\n", ["a", ""]),
        ("a\r\nb\r\n", ["a", "b"]),
        ("a\r\nb", ["a", "b"]),
        # One '\r' is removed per line; a lone '\r' inside a line is not a break.
        ("a\r\r\nb\rc\n", ["a\r", "b\rc"]),
    ],
)
def test_split_lines(text, lines):
    assert split_lines(text) == lines


@pytest.mark.parametrize("character", SPLITLINES_ONLY_BREAKS)
def test_split_lines_keeps_the_line_count(character):
    text = f"first\nse{character}cond{character}\n{character}\nlast"
    assert split_lines(text) == ["first", f"se{character}cond{character}", character, "last"]
    crlf = text.replace("\n", "\r\n") + "\r\n"
    assert split_lines(crlf) == split_lines(text)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("character", SPLITLINES_ONLY_BREAKS)
def test_read_lines_keeps_the_line_count(tmp_path, character, compress):
    path = tmp_path / "input.txt"
    data = f"one\r\ntw{character}o\r\nthree\r\n".encode()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(data)
    assert read_lines(str(path)) == ["one", f"tw{character}o", "three"]


def test_read_lines_replaces_invalid_utf8_by_default(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(b"fine\nbad \xff byte\nend")
    assert read_lines(str(path)) == ["fine", "bad \ufffd byte", "end"]
    with pytest.raises(InvalidUtf8Error, match=f"{path}, line 2: invalid UTF-8"):
        read_lines(str(path), invalid_utf8="error")


def test_read_lines_of_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert read_lines(str(path)) == []


@pytest.mark.parametrize("character", SPLITLINES_ONLY_BREAKS)
def test_local_corpus_keeps_the_line_count(tmp_path, character):
    # The character is on the source side only: a split there would misalign the pairs
    # (and fail the line-count check).
    (tmp_path / "train.en").write_bytes(f"A dog .\r\nTwo{character} men .\r\nA cat\r\n".encode())
    (tmp_path / "train.de").write_bytes("Ein Hund .\nZwei Männer .\nEine Katze\n".encode())
    source = LocalFilesSource({"train": str(tmp_path / "train")}, "en", "de")
    source.check()
    assert list(source.read_split("train", LineDecoder())) == [
        ("A dog .", "Ein Hund ."),
        (f"Two{character} men .", "Zwei Männer ."),
        ("A cat", "Eine Katze"),
    ]


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
