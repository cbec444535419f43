"""The shortlist of a model: per source piece its likely target pieces, and the file
that stores it.

A batch is decoded against the union of its source pieces' rows, the most frequent target
pieces and the special tokens (`ShortlistTable.output_vocabulary`), as the paper (section
5.4), Marian's lexical shortlist and CTranslate2's vocabulary map do. The set is per
batch: a sentence's translation depends on its batch-mates only through the target
pieces their source pieces add to the set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from typing import Any

import numpy as np
import numpy.typing as npt
import tensorflow as tf

from convs2s_tf.vocabulary import BOS_ID, NUM_SPECIAL_TOKENS

SHORTLIST_FILE = "shortlist.npz"
_FORMAT = "convs2s_tf.shortlist/1"


class ShortlistError(ValueError):
    """A shortlist file that is missing, unreadable or made for another vocabulary."""


@dataclasses.dataclass(frozen=True)
class Shortlist:
    """Per source id its top target ids, and the most frequent target ids.

    Attributes:
        top_targets: `[source_vocab_size, k]` int32 target ids, best first, -1 where a
            source id has fewer known targets.
        frequent: `[n]` int32 target ids, most frequent first.
        target_vocab_size: Size of the target vocabulary the ids index.
        metadata: What it was built from (method, files, pairs), JSON-serialisable.

    Example:

    >>> shortlist = Shortlist(np.array([[-1], [-1], [-1], [-1], [7]], np.int32),
    ...                       np.array([5], np.int32), target_vocab_size=9)
    >>> shortlist.candidate_ids([[4, 2]]).tolist()
    [0, 1, 2, 3, 5, 7]
    """

    top_targets: np.ndarray
    frequent: np.ndarray
    target_vocab_size: int
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        top, frequent = np.asarray(self.top_targets), np.asarray(self.frequent)
        if top.ndim != 2 or frequent.ndim != 1:
            raise ShortlistError("top_targets must be [sources, k] and frequent [n].")
        ids = np.concatenate([top.ravel(), frequent])
        if len(ids) and (ids.min() < -1 or ids.max() >= self.target_vocab_size):
            raise ShortlistError(
                f"A target id lies outside the vocabulary of {self.target_vocab_size}."
            )
        object.__setattr__(self, "top_targets", top.astype(np.int32))
        object.__setattr__(self, "frequent", frequent.astype(np.int32))

    @property
    def source_vocab_size(self) -> int:
        return self.top_targets.shape[0]

    @property
    def k(self) -> int:
        """Targets kept per source id."""
        return self.top_targets.shape[1]

    @property
    def n(self) -> int:
        """Frequent target ids always in the set."""
        return self.frequent.shape[0]

    def limited(self, k: int | None = None, n: int | None = None) -> Shortlist:
        """A copy with only the best `k` targets per source id and the first `n` frequent
        ones (None: all), to compare sizes from one fitted table."""
        k = self.k if k is None else k
        n = self.n if n is None else n
        metadata = dict(self.metadata, k=k, n=n)
        return Shortlist(
            self.top_targets[:, :k], self.frequent[:n], self.target_vocab_size, metadata
        )

    def candidate_ids(self, source_ids: npt.ArrayLike) -> np.ndarray:
        """The sorted target ids a batch of `source_ids` (nested lists) is decoded against."""
        rows = self.top_targets[np.asarray(source_ids, np.int64).ravel()].ravel()
        ids = np.concatenate([rows[rows >= 0], self.frequent, np.arange(NUM_SPECIAL_TOKENS)])
        return np.unique(ids)

    def check_vocabularies(
        self, source_vocab_size: int, target_vocab_size: int, name: str = "The shortlist"
    ) -> Shortlist:
        """Raises ShortlistError unless it was built for these vocabulary sizes."""
        if (self.source_vocab_size, self.target_vocab_size) != (
            source_vocab_size,
            target_vocab_size,
        ):
            raise ShortlistError(
                f"{name} was built for {self.source_vocab_size} source and "
                f"{self.target_vocab_size} target ids, but the model has "
                f"{source_vocab_size} and {target_vocab_size}: rebuild it with "
                "pipelines.build_shortlist for this model."
            )
        return self

    def save(self, path: str) -> str:
        """Writes the arrays and metadata to an `.npz` file (no pickled objects)."""
        metadata = dict(self.metadata, format=_FORMAT, target_vocab_size=self.target_vocab_size)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path + ".tmp", "wb") as file:
            np.savez(
                file,
                top_targets=self.top_targets,
                frequent=self.frequent,
                metadata=np.array(json.dumps(metadata)),
            )
        os.replace(path + ".tmp", path)
        return path

    @classmethod
    def load(cls, path: str) -> Shortlist:
        """Reads a file written by `save`.

        Raises:
            ShortlistError: The file is missing, corrupt or not a shortlist.
        """
        if not os.path.isfile(path):
            raise ShortlistError(
                f"Shortlist {path} not found: build it with python -m pipelines.build_shortlist."
            )
        try:
            with np.load(path, allow_pickle=False) as arrays:
                metadata = json.loads(str(arrays["metadata"]))
                top_targets, frequent = arrays["top_targets"], arrays["frequent"]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            raise ShortlistError(f"Shortlist {path} is not readable: {error}") from None
        if metadata.get("format") != _FORMAT:
            raise ShortlistError(f"{path} is not a shortlist of this toolkit ({_FORMAT}).")
        return cls(top_targets, frequent, int(metadata["target_vocab_size"]), metadata)


class ShortlistTable(tf.Module):
    """A `Shortlist` in the graph: the candidate set of each batch, in core TF ops.

    Its tables are non-trainable variables, so a SavedModel stores them once for every
    signature.

    Args:
        shortlist: The `Shortlist`.
    """

    def __init__(self, shortlist: Shortlist, name: str = "shortlist") -> None:
        super().__init__(name=name)
        self.k = shortlist.k
        self.n = shortlist.n
        self.vocab_size = shortlist.target_vocab_size
        # -1 (no target) becomes <s>, a special id every set holds anyway.
        top = np.where(shortlist.top_targets < 0, BOS_ID, shortlist.top_targets)
        self.top_targets = tf.Variable(top, trainable=False, name="top_targets")
        specials = np.arange(NUM_SPECIAL_TOKENS, dtype=np.int32)
        self.always = tf.Variable(
            np.concatenate([specials, shortlist.frequent]), trainable=False, name="always"
        )

    def capacity(self, rows: int, source_length: int) -> int:
        """The most ids `output_vocabulary` can return for `rows` sources of
        `source_length` tokens (a compiled search pads its set to this fixed size)."""
        bound = NUM_SPECIAL_TOKENS + self.n + rows * source_length * self.k
        return int(min(self.vocab_size, bound))

    def output_vocabulary(
        self,
        source: tf.Tensor,
        min_size: int | tf.Tensor = 1,
        capacity: int | None = None,
        multiple: int | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """The sorted target ids a batch is decoded against.

        The special ids come first (columns 0..3 are ids 0..3, as in the full
        vocabulary), then the rest in increasing order.

        Args:
            source: `[batch, source]` int32 source ids (padding and `</s>` included).
            min_size: Fewest columns returned (the search takes `2 k` per row).
            capacity: A fixed number of columns (a Python int, for compiled searches);
                default the set's size, at least `min_size`.
            multiple: Without `capacity`, round the columns up to a multiple of this.

        Returns:
            `(ids, valid)`: `[columns]` int32 ids and bool, False for the filler columns
            after the set (their ids are `<s>`; the projection gives them -inf).
        """
        picked = tf.reshape(tf.gather(self.top_targets, source), [-1])
        ids = tf.concat([picked, self.always.value()], axis=0)
        member = tf.scatter_nd(ids[:, None], tf.ones_like(ids), [self.vocab_size]) > 0
        # Members score vocab_size - id, others 0: a top-k gives members in id order.
        score = tf.where(member, self.vocab_size - tf.range(self.vocab_size), 0)
        if capacity is None:
            size = tf.maximum(tf.reduce_sum(tf.cast(member, tf.int32)), min_size)
            if multiple:
                size = (size + multiple - 1) // multiple * multiple
            capacity = tf.minimum(size, self.vocab_size)
        scores, ids = tf.math.top_k(score, k=capacity, sorted=True)
        valid = scores > 0
        return tf.where(valid, ids, BOS_ID), valid
