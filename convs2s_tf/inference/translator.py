"""The translator interface: one API over a checkpoint, a text export and a token-ids
export, the errors a translator reports to its caller, and how many texts are batched
(`translate_all`, `pipelines.translate`): by length, and two batches at a time.

The batching only changes the speed: a sentence's translation does not depend on the
sentences batched with it, nor on what else runs meanwhile.

The implementations (`text_translators`, `token_ids_translator`) and the factory that
picks one (`factory`) build on this module, which imports nothing else of
`convs2s_tf.inference`.
"""

from __future__ import annotations

import abc
import collections
import concurrent.futures
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import tensorflow as tf

from convs2s_tf.cores import available_cores
from convs2s_tf.decoding import MIN_LENGTH_ERROR

# Sentences per batch of `translate_all` (and the pipelines' default batch size).
BATCH_SIZE = 64

# Batches `map_in_flight` translates at once. A search step is a few hundred small
# operations run one after another, so one batch leaves a core idle much of the time;
# two batches in flight keep both cores of a small machine busy (docs/performance.md).
IN_FLIGHT_BATCHES = 2

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def length_sorted_batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Batches of indices into `texts`, `batch_size` at most, longest texts first.

    Sentences of similar length share a batch, as in fairseq: less padding, and a
    batch's search ends with its longest sentence rather than the corpus'.

    Args:
        texts: The texts (strings); their length in characters orders them (ties keep
            their order).
        batch_size: Most indices per batch (>= 1).

    Returns:
        A list of lists of indices; together they cover `range(len(texts))` once.

    >>> length_sorted_batches(["a b", "a b c d", "", "a"], 3)
    [[1, 0, 3], [2]]
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def map_in_flight(
    function: Callable[[_Item], _Result], items: Iterable[_Item], in_flight: int | None = None
) -> Iterator[_Result]:
    """Yields `function(item)` for each of `items`, in order, with up to `in_flight` calls
    running at once on threads (TensorFlow releases the GIL while a function runs).

    No more than `in_flight` calls are ever started ahead of the results taken, so an
    exception (re-raised here, in order) or a consumer that stops leaves at most that
    many calls to finish, and nothing further starts.

    Args:
        function: Called with one item at a time.
        items: An iterable.
        in_flight: Calls at once (default `IN_FLIGHT_BATCHES`); 1: in this thread.

    >>> list(map_in_flight(len, ["a", "bcd", ""]))
    [1, 3, 0]
    """
    in_flight = IN_FLIGHT_BATCHES if in_flight is None else in_flight
    if in_flight < 1:
        raise ValueError(f"in_flight must be >= 1, got {in_flight}.")
    if in_flight == 1:
        yield from map(function, items)
        return
    pool = concurrent.futures.ThreadPoolExecutor(in_flight)
    pending: collections.deque[concurrent.futures.Future[_Result]] = collections.deque()
    try:
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) == in_flight:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)


def search_one_batch_per_core() -> int:
    """Gives each batch's search one core (TensorFlow's intra-op threads) and returns
    how many batches to search at once (`map_in_flight`): one per core, plus one whose
    strings are being prepared or decoded meanwhile.

    A search step is a chain of small operations: spread over several cores, one batch
    mostly waits for them to synchronise, so one core per batch gets more done
    (docs/performance.md, "Several cores"). The threads can only be
    set before TensorFlow first runs; after that the process keeps its threads and
    `IN_FLIGHT_BATCHES` are searched at once.
    """
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already runs (e.g. main called in-process).
        return IN_FLIGHT_BATCHES
    return available_cores() + 1


class InferenceError(ValueError):
    """A model, export or request that cannot work as asked (no tokenizer, a search beyond
    the model, more hypotheses than a translator returns): the caller's choice, not a bug.
    """


class UnsupportedRequestError(InferenceError):
    """A request beyond what a translator offers (e.g. n-best lists or attention from an
    export with the `translate_ids` signature alone)."""


def run_search(function: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
    """Calls a search `function`, reporting a `min_length` no sentence of the batch can
    meet as an `InferenceError` (the graph's assertion message is unreadable)."""
    try:
        return function(*args, **kwargs)
    except tf.errors.InvalidArgumentError as error:
        if MIN_LENGTH_ERROR not in error.message:
            raise
        raise InferenceError(
            "`min_length` exceeds the maximum output length (`max_len_a` * source length + "
            "`max_len_b`) of a sentence in this batch: lower `min_length` or raise the "
            "maximum."
        ) from None


class Translator(abc.ABC):
    """Translates batches of strings, with n-best lists and, where offered, attention.

    Implementations (`convs2s_tf.inference.open_translator` picks one for a run or an
    export directory, `open_saved_model` for an export):

    * `CheckpointTranslator(model, tokenizer, search_config)`: an in-process model and
      tokenizer;
    * `SavedModelTranslator`: a text export (`open_saved_model`); it runs the same
      `TranslationModule` functions as the checkpoint, so their outputs are identical;
    * `TokenIdsTranslator`: a token-ids export (`open_saved_model`), space-separated
      tokens in and out, best hypothesis only.

    Ask `check_request` before a long job: a request a translator cannot serve raises
    `UnsupportedRequestError` there, as it would on the first batch.

    Attributes:
        beam_size: The search's beam size, or None where the translator cannot tell.
        max_nbest: The most hypotheses `translate` returns per text (None: unknown).
        supports_attention: Whether `translate_with_attention` is offered.
    """

    beam_size: int | None = None
    max_nbest: int | None = None
    supports_attention: bool = False

    def check_request(self, nbest: int = 1, attention: bool = False) -> None:
        """Raises `UnsupportedRequestError` unless `translate(texts, nbest)` (and, if
        `attention`, `translate_with_attention`) can be served."""
        if nbest < 1 or (self.max_nbest is not None and nbest > self.max_nbest):
            raise UnsupportedRequestError(self._nbest_error(nbest))
        if attention and not self.supports_attention:
            raise UnsupportedRequestError(self._attention_error())

    def translate(self, texts: Iterable[str], nbest: int = 1) -> list[list[tuple[str, float]]]:
        """Returns, per text, a list of `nbest` `(translation, score)`, best first.

        Raises:
            UnsupportedRequestError: `nbest` beyond `max_nbest`.
            InferenceError: The search cannot serve a text (see `run_search`).
        """
        self.check_request(nbest=nbest)
        texts = list(texts)
        return self._translate(texts, nbest) if texts else []

    def translate_all(
        self,
        texts: Iterable[str],
        batch_size: int = BATCH_SIZE,
        sort_by_length: bool = True,
        in_flight: int | None = None,
    ) -> list[str]:
        """The best translation of every text, in the order of `texts`.

        Args:
            texts: The texts to translate.
            batch_size: Texts per batch.
            sort_by_length: Batch texts of similar length together
                (`length_sorted_batches`), which is faster and gives the same
                translations; False: `batch_size` consecutive texts at a time.
            in_flight: Batches translated at once (default `IN_FLIGHT_BATCHES`; see
                `map_in_flight`).
        """
        texts = list(texts)
        if sort_by_length:
            batches = length_sorted_batches(texts, batch_size)
        else:
            batches = [
                list(range(start, min(start + batch_size, len(texts))))
                for start in range(0, len(texts), batch_size)
            ]

        def translate_batch(indices: list[int]) -> list[list[tuple[str, float]]]:
            return self.translate([texts[index] for index in indices])

        translations: list[Any] = [None] * len(texts)
        for indices, hypotheses in zip(batches, map_in_flight(translate_batch, batches, in_flight)):
            for index, nbest in zip(indices, hypotheses):
                translations[index] = nbest[0][0]
        return translations

    def translate_with_attention(self, texts: Iterable[str]) -> list[dict[str, Any]]:
        """Returns, per text, a dict with translation, score, attention `[target, source]`
        and the source and target pieces labelling its axes.

        Raises:
            UnsupportedRequestError: The translator offers no attention.
        """
        self.check_request(attention=True)
        texts = list(texts)
        return self._translate_with_attention(texts) if texts else []

    @abc.abstractmethod
    def _translate(self, texts: list[str], nbest: int) -> list[list[tuple[str, float]]]:
        """`translate` of a non-empty list, `nbest` already checked."""

    def _translate_with_attention(self, texts: list[str]) -> list[dict[str, Any]]:
        """`translate_with_attention` of a non-empty list (if `supports_attention`)."""
        raise NotImplementedError

    def _nbest_error(self, nbest: int) -> str:
        return f"`nbest={nbest}` must be between 1 and {self.max_nbest}."

    def _attention_error(self) -> str:
        return f"A {type(self).__name__} has no attention."
