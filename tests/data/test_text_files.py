"""Tests of reading text files: one line per '\\n', whatever the text holds.

`str.splitlines()` also ends lines at '\\r', '\\x0b', '\\x0c', '\\x1c'-'\\x1e', U+0085, U+2028
and U+2029; a sentence holding one would become two lines and shift every later
translation against its source. `split_lines` and `read_lines` keep such characters
inside a line (as do local corpora, `tests/data/test_sources.py`, and fairseq
dictionaries, `tests/interop/test_fairseq_dictionary.py`).
"""

import time
import tracemalloc

import pytest
from helpers.text_files import SPLITLINES_ONLY_BREAKS, write_bytes

from convs2s_tf.data import text_files
from convs2s_tf.data.errors import InvalidUtf8Error
from convs2s_tf.data.text_files import (
    MAX_LINE_BYTES,
    LineDecoder,
    LineTooLongError,
    iter_raw_lines,
    read_lines,
    read_parallel_lines,
    split_lines,
)

BOM = "\ufeff"


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


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_byte_order_mark_opening_a_file_is_not_text(tmp_path, compress):
    # Notepad and PowerShell write one; kept, it becomes part of the first sentence.
    source = write_bytes(tmp_path / "a.en", f"{BOM}one\r\ntwo\r\n".encode(), compress)
    target = write_bytes(tmp_path / "a.de", f"eins\nzwei {BOM}\n".encode(), compress)
    assert read_lines(source) == ["one", "two"]
    # Only the file's first bytes are a byte order mark; later, U+FEFF is text.
    assert list(read_parallel_lines(source, target, LineDecoder("error"))) == [
        ("one", "eins"),
        ("two", f"zwei {BOM}"),
    ]
    assert read_lines(write_bytes(tmp_path / "bom-only", BOM.encode())) == []
    assert split_lines(f"{BOM}one\ntwo") == ["one", "two"]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    "data, lines",
    [
        (b"one\rtwo\r\rfour\r", ["one", "two", "", "four"]),
        (b"one\rtwo", ["one", "two"]),
        (b"\xef\xbb\xbfone\rtwo\r", ["one", "two"]),
        (b"one\r\ntwo\r\n", ["one", "two"]),
        # A file with '\n' line endings keeps a lone '\r' inside its line.
        (b"a\rb\nc\n", ["a\rb", "c"]),
    ],
    ids=["cr", "cr-no-final", "cr-bom", "crlf", "lf-with-cr-inside"],
)
def test_classic_mac_os_line_endings_are_lines(tmp_path, data, lines, compress):
    assert read_lines(write_bytes(tmp_path / "input.txt", data, compress)) == lines
    assert split_lines(data.decode("utf-8-sig")) == lines


def test_line_endings_are_told_apart_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(text_files, "_BLOCK_BYTES", 16)
    monkeypatch.setattr(text_files, "_CR_LOOKAHEAD_BYTES", 40)
    sentences = [f"sentence {index}" for index in range(20)]
    cr_only = write_bytes(tmp_path / "cr.txt", "\r".join(sentences).encode())
    assert read_lines(cr_only) == sentences
    # A '\r' inside a line, its '\n' a few blocks (but fewer than the lookahead) later.
    lf = write_bytes(tmp_path / "lf.txt", ("a\r" + "b" * 30 + "\n" + "\n".join(sentences)).encode())
    assert read_lines(lf) == ["a\r" + "b" * 30] + sentences


def test_a_long_line_is_read_in_linear_time_and_memory(tmp_path, monkeypatch):
    # Smaller blocks than the default 1 MiB, so that a reader copying the line once per
    # block (quadratic: ~13 s here) cannot pass; a linear one takes ~0.1 s.
    monkeypatch.setattr(text_files, "_BLOCK_BYTES", 1 << 16)
    line = b"ab" * (25 << 20)  # 50 MiB
    path = tmp_path / "long.txt"
    with open(path, "wb") as f:
        f.writelines([b"first\n", line, b"\r\nlast"])
    tracemalloc.start()
    try:
        started = time.process_time()
        lines = list(iter_raw_lines(str(path)))
        seconds = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == [b"first", line, b"last"]
    assert seconds < 2.0, seconds
    # The line's pieces and the line joined from them, no more.
    assert peak < 2.5 * len(line), peak


def test_a_line_longer_than_the_limit_is_refused_with_its_number(tmp_path):
    path = write_bytes(tmp_path / "input.txt", b"short\n" + b"x" * 1000 + b"\r\nend\n")
    assert len(list(iter_raw_lines(path, max_line_bytes=1000))) == 3
    with pytest.raises(LineTooLongError, match=f"{path}, line 2: longer than 999 bytes"):
        list(iter_raw_lines(path, max_line_bytes=999))
    # A file with no line break at all (1 GiB, sparse) fails after reading about the
    # limit, not the whole file.
    no_breaks = tmp_path / "no-breaks.bin"
    with open(no_breaks, "wb") as f:
        f.truncate(1 << 30)
    started = time.process_time()
    with pytest.raises(LineTooLongError, match=f"line 1: longer than {MAX_LINE_BYTES} bytes"):
        read_lines(str(no_breaks))
    assert time.process_time() - started < 2.0
