"""Errors raised while reading and preparing parallel corpora.

They derive from the built-in exception a caller would catch anyway (ValueError,
FileNotFoundError, RuntimeError), so plain `except ValueError` keeps working.
"""


class LineCountMismatchError(ValueError):
    """The two sides of a parallel corpus have different numbers of lines."""


class InvalidUtf8Error(ValueError):
    """A line of a corpus file is not valid UTF-8."""


class CorpusFileNotFoundError(FileNotFoundError):
    """A corpus file named by a prefix and language does not exist."""


class DatasetUnavailableError(RuntimeError):
    """A tfds catalog dataset is neither prepared locally nor downloadable right now."""


class CorruptShardError(ValueError):
    """A prepared shard does not match its lengths index (size, checksum, or missing)."""


class SentencePieceModelError(ValueError):
    """A SentencePiece model given to tokenise with cannot serve: unreadable, or its
    special pieces are not at the project's ids."""
