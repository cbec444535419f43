"""The translator interface: one API over a checkpoint, a text export and a token-ids
export, and the errors a translator reports to its caller."""

import abc

import tensorflow as tf

from convs2s_tf.decoding import MIN_LENGTH_ERROR
from convs2s_tf.inference.batching import length_sorted_batches, map_in_flight

# Sentences per batch of `translate_all` (and the pipelines' default --batch_size).
BATCH_SIZE = 64


class InferenceError(ValueError):
    """A model, export or request that cannot work as asked (no tokenizer, a search beyond
    the model, more hypotheses than a translator returns): the caller's choice, not a bug.
    """


class UnsupportedRequestError(InferenceError):
    """A request beyond what a translator offers (e.g. n-best lists or attention from an
    export with the `translate_ids` signature alone)."""


def run_search(function, *args, **kwargs):
    """Calls a search `function`, reporting a `--min_length` no sentence of the batch can
    meet as an `InferenceError` (the graph's assertion message is unreadable)."""
    try:
        return function(*args, **kwargs)
    except tf.errors.InvalidArgumentError as error:
        if MIN_LENGTH_ERROR not in error.message:
            raise
        raise InferenceError(
            "--min_length exceeds the maximum output length (--max_len_a * source length + "
            "--max_len_b) of a sentence in this batch: lower --min_length or raise the "
            "maximum."
        ) from None


class Translator(abc.ABC):
    """Translates batches of strings, with n-best lists and, where offered, attention.

    Implementations (`convs2s_tf.inference.open_translator` picks one for a run or an
    export directory):

    * `CheckpointTranslator`: an in-process model and tokenizer (`from_checkpoint`);
    * `SavedModelTranslator`: a text export (`from_saved_model`); it runs the same
      `TranslationModule` functions as the checkpoint, so their outputs are identical;
    * `TokenIdsTranslator`: a token-ids export (`from_saved_model`), space-separated
      tokens in and out, best hypothesis only.

    Ask `check_request` before a long job: a request a translator cannot serve raises
    `UnsupportedRequestError` there, as it would on the first batch.

    Attributes:
        beam_size: The search's beam size, or None where the translator cannot tell.
        max_nbest: The most hypotheses `translate` returns per text (None: unknown).
        supports_attention: Whether `translate_with_attention` is offered.
    """

    beam_size = None
    max_nbest = None
    supports_attention = False

    @classmethod
    def from_checkpoint(cls, model, tokenizer, search_config=None):
        """A `CheckpointTranslator` over the in-process `model` with `search_config`'s
        search (default: `SearchConfig()`)."""
        # The implementations subclass this class: imported on use, not at module level.
        from convs2s_tf.inference.text_translators import CheckpointTranslator

        return CheckpointTranslator(model, tokenizer, search_config)

    @classmethod
    def from_saved_model(cls, path):
        """The translator of the export at `path` (a version directory, or a base directory
        whose newest version is used): text or token ids, as the export was written."""
        from convs2s_tf.inference.factory import open_saved_model

        return open_saved_model(path)

    def check_request(self, nbest=1, attention=False):
        """Raises `UnsupportedRequestError` unless `translate(texts, nbest)` (and, if
        `attention`, `translate_with_attention`) can be served."""
        if nbest < 1 or (self.max_nbest is not None and nbest > self.max_nbest):
            raise UnsupportedRequestError(self._nbest_error(nbest))
        if attention and not self.supports_attention:
            raise UnsupportedRequestError(self._attention_error())

    def translate(self, texts, nbest=1):
        """Returns, per text, a list of `nbest` `(translation, score)`, best first.

        Raises:
            UnsupportedRequestError: `nbest` beyond `max_nbest`.
            InferenceError: The search cannot serve a text (see `run_search`).
        """
        self.check_request(nbest=nbest)
        texts = list(texts)
        return self._translate(texts, nbest) if texts else []

    def translate_all(self, texts, batch_size=BATCH_SIZE, sort_by_length=True, in_flight=None):
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

        def translate_batch(indices):
            return self.translate([texts[index] for index in indices])

        translations = [None] * len(texts)
        for indices, hypotheses in zip(batches, map_in_flight(translate_batch, batches, in_flight)):
            for index, nbest in zip(indices, hypotheses):
                translations[index] = nbest[0][0]
        return translations

    def translate_with_attention(self, texts):
        """Returns, per text, a dict with translation, score, attention `[target, source]`
        and the source and target pieces labelling its axes.

        Raises:
            UnsupportedRequestError: The translator offers no attention.
        """
        self.check_request(attention=True)
        texts = list(texts)
        return self._translate_with_attention(texts) if texts else []

    @abc.abstractmethod
    def _translate(self, texts, nbest):
        """`translate` of a non-empty list, `nbest` already checked."""

    def _translate_with_attention(self, texts):
        """`translate_with_attention` of a non-empty list (if `supports_attention`)."""
        raise NotImplementedError

    def _nbest_error(self, nbest):
        return f"--nbest={nbest} must be between 1 and {self.max_nbest}."

    def _attention_error(self):
        return f"A {type(self).__name__} has no attention."
