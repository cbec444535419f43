"""fairseq's token dictionaries (`dict.txt`), read exactly as fairseq reads them.

A fairseq `Dictionary` starts with `<s>`=0, `<pad>`=1, `</s>`=2 and `<unk>`=3 (the ids of
`convs2s_tf.vocabulary`), then holds the lines of `dict.txt` in file order, one
`<token> <count> [#fairseq:overwrite]` per line. A repeated token is an error unless its
line carries `#fairseq:overwrite`, in which case it takes a new id and the token then
looks up that newer id (fairseq's own rule).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from convs2s_tf import vocabulary

SPECIAL_SYMBOLS = (
    vocabulary.BOS_PIECE,
    vocabulary.PAD_PIECE,
    vocabulary.EOS_PIECE,
    vocabulary.UNK_PIECE,
)
_OVERWRITE_FLAG = "#fairseq:overwrite"


class DictionaryError(ValueError):
    """A dictionary file that fairseq itself would refuse."""


class Dictionary:
    """The symbols of a fairseq dictionary, in id order.

    Attributes:
        symbols: Every symbol, its id being its index (the 4 specials first).
        counts: The count of each symbol (0 for the specials).

    Example:

    >>> dictionary = Dictionary.from_tokens(["the", "cat"])
    >>> dictionary.index("cat"), dictionary.index("dog"), len(dictionary)
    (5, 3, 6)
    """

    def __init__(self) -> None:
        self.symbols = list(SPECIAL_SYMBOLS)
        self.counts = [0] * len(SPECIAL_SYMBOLS)
        self._indices = {symbol: index for index, symbol in enumerate(self.symbols)}

    @classmethod
    def from_tokens(cls, tokens: Iterable[str], counts: Sequence[int] | None = None) -> Dictionary:
        """A dictionary of the specials followed by `tokens` (which must be distinct)."""
        dictionary = cls()
        for position, token in enumerate(tokens):
            count = counts[position] if counts is not None else 0
            dictionary._add(token, count, overwrite=False, where=f"token {position}")
        return dictionary

    @classmethod
    def load(cls, path: str) -> Dictionary:
        """Reads a fairseq `dict.txt`.

        Raises:
            FileNotFoundError: `path` does not exist.
            DictionaryError: A malformed line or a repeated token without
                `#fairseq:overwrite`, naming the file and line.
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Dictionary file {path} does not exist.")
        try:
            # fairseq's `Dictionary.add_from_file` reads `readlines()` of a text-mode file:
            # lines end at '\n', '\r\n' or a lone '\r' (universal newlines) but not at
            # U+2028, U+0085, '\x1c', ... (which `str.splitlines()` would also break at),
            # so such a character stays inside its token and the ids match fairseq's.
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except UnicodeDecodeError as error:
            raise DictionaryError(f"{path} is not UTF-8 text ({error}).") from None
        dictionary = cls()
        for number, line in enumerate(lines, start=1):
            line = line.removesuffix("\n")
            where = f"{path}, line {number}"
            parts = line.rstrip().rsplit(" ", 1)
            if len(parts) != 2:
                raise DictionaryError(
                    f"Incorrect dictionary format in {where}: expected '<token> <count> "
                    f"[flags]', got {line!r}."
                )
            token, field = parts
            overwrite = field == _OVERWRITE_FLAG
            if overwrite:
                parts = token.rsplit(" ", 1)
                if len(parts) != 2:
                    raise DictionaryError(f"Incorrect dictionary format in {where}: {line!r}.")
                token, field = parts
            try:
                count = int(field)
            except ValueError:
                raise DictionaryError(
                    f"Incorrect dictionary format in {where}: the count {field!r} is not an "
                    "integer."
                ) from None
            dictionary._add(token, count, overwrite, where)
        return dictionary

    def _add(self, token: str, count: int, overwrite: bool, where: str) -> None:
        if token in self._indices and not overwrite:
            raise DictionaryError(
                f"Duplicate token {token!r} in {where}; fairseq accepts a repeated token only "
                f"with the {_OVERWRITE_FLAG} flag at the end of its line."
            )
        self._indices[token] = len(self.symbols)
        self.symbols.append(token)
        self.counts.append(int(count))

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, token: object) -> bool:
        return token in self._indices

    def index(self, token: str) -> int:
        """The id of `token`, `<unk>`'s id for a token not in the dictionary."""
        return self._indices.get(token, vocabulary.UNK_ID)

    def lookup_items(self) -> list[tuple[str, int]]:
        """`(token, id)` pairs of every token as fairseq looks it up (a token repeated
        with `#fairseq:overwrite` maps to its last id)."""
        return sorted(self._indices.items(), key=lambda item: item[1])

    def encode_line(self, line: str) -> list[int]:
        """fairseq's `encode_line` without `</s>`: whitespace-split tokens to ids, unknown
        tokens to `<unk>`. The special tokens typed as text also become `<unk>` (fairseq
        would feed a literal `<pad>` or `</s>` to the model as padding or end)."""
        return [
            vocabulary.UNK_ID if token in SPECIAL_SYMBOLS else self.index(token)
            for token in line.split()
        ]

    def decode_ids(self, ids: Iterable[int]) -> str:
        """Space-joined tokens of `ids` up to the first `</s>`, without `<pad>` and `<s>`
        (as fairseq's `Dictionary.string`)."""
        tokens = []
        for index in ids:
            index = int(index)
            if index == vocabulary.EOS_ID:
                break
            if index in (vocabulary.PAD_ID, vocabulary.BOS_ID):
                continue
            tokens.append(self.symbols[index] if 0 <= index < len(self) else vocabulary.UNK_PIECE)
        return " ".join(tokens)

    def save(self, path: str) -> None:
        """Writes the dictionary in fairseq's format (the specials are implicit).

        Raises:
            DictionaryError: A token holds a line break, which fairseq would read as two
                lines (shifting every later id).
        """
        for symbol in self.symbols:
            if "\n" in symbol or "\r" in symbol:
                raise DictionaryError(
                    f"Token {symbol!r} holds a line break: fairseq reads dictionaries line by "
                    "line, so it cannot hold this token."
                )
        seen = set(SPECIAL_SYMBOLS)
        with open(path, "w", encoding="utf-8") as f:
            for symbol, count in zip(
                self.symbols[len(SPECIAL_SYMBOLS) :], self.counts[len(SPECIAL_SYMBOLS) :]
            ):
                flag = f" {_OVERWRITE_FLAG}" if symbol in seen else ""
                seen.add(symbol)
                f.write(f"{symbol} {count}{flag}\n")
