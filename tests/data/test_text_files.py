"""Tests of reading text files: one line per '\\n', whatever the text holds.

`str.splitlines()` also ends lines at '\\r', '\\x0b', '\\x0c', '\\x1c'-'\\x1e', U+0085, U+2028
and U+2029; a sentence holding one would become two lines and shift every later
translation against its source. `split_lines` and `read_lines` keep such characters
inside a line (as do local corpora, `tests/data/test_sources.py`, and fairseq
dictionaries, `tests/interop/test_fairseq_dictionary.py`).
"""

import pytest
from helpers.text_files import SPLITLINES_ONLY_BREAKS, write_bytes

from convs2s_tf.data.errors import InvalidUtf8Error
from convs2s_tf.data.text_files import LineDecoder, read_lines, read_parallel_lines, split_lines


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
    write_bytes(path, data, compress)
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


def test_invalid_utf8_names_file_and_line_or_is_replaced_and_counted(tmp_path):
    source_path = write_bytes(tmp_path / "train.en", b"fine\nalso fine\nbad \xff\xfe byte\n")
    target_path = write_bytes(tmp_path / "train.de", b"gut\nauch gut\nschlecht\n")
    with pytest.raises(InvalidUtf8Error, match=f"{source_path}, line 3: invalid UTF-8"):
        list(read_parallel_lines(source_path, target_path, LineDecoder("error")))
    decoder = LineDecoder("replace")
    pairs = list(read_parallel_lines(source_path, target_path, decoder))
    assert pairs[2] == ("bad \ufffd\ufffd byte", "schlecht")
    assert dict(decoder.replaced_lines) == {source_path: 1}
