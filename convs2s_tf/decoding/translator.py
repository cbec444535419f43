"""One interface over the two ways of translating: a checkpoint or a SavedModel."""

import numpy as np
import tensorflow as tf

from convs2s_tf.decoding.beam_search import MIN_LENGTH_ERROR
from convs2s_tf.export.translation_module import TranslationModule

# Sentences per batch of `translate_all` (and the pipelines' default --batch_size).
BATCH_SIZE = 64


def _run(function, texts):
    try:
        return function(texts)
    except tf.errors.InvalidArgumentError as error:
        if MIN_LENGTH_ERROR not in error.message:
            raise
        raise ValueError(
            "--min_length exceeds the maximum output length (--max_len_a * source length + "
            "--max_len_b) of a sentence in this batch: lower --min_length or raise the "
            "maximum."
        ) from None


def _strings(tensor):
    return [value.decode("utf-8", errors="replace") for value in np.asarray(tensor).ravel()]


class Translator:
    """Translates batches of strings with n-best lists and, on request, attention.

    Build it with `from_checkpoint` (the in-process model) or `from_saved_model`; both
    run the same `TranslationModule` functions, so their outputs are identical.
    """

    def __init__(self, translate, translate_nbest, translate_with_attention, beam_size, owner):
        # The module (or loaded SavedModel) the functions belong to: tf.function methods
        # only hold a weak reference to it.
        self._owner = owner
        self._translate = translate
        self._translate_nbest = translate_nbest
        self._translate_with_attention = translate_with_attention
        self.beam_size = beam_size

    @classmethod
    def from_checkpoint(cls, model, tokenizer, search_config=None):
        """A translator over the in-process `model` with `search_config`'s search."""
        module = TranslationModule(model, tokenizer, search_config)
        return cls(
            module.translate,
            module.translate_nbest,
            module.translate_with_attention,
            module.search_config.beam_size,
            module,
        )

    @classmethod
    def from_saved_model(cls, path):
        import tensorflow_text  # noqa: F401 (registers the SentencePiece ops of the export)

        loaded = tf.saved_model.load(path)
        signatures = loaded.signatures
        nbest = signatures["translate_nbest"].structured_outputs["scores"].shape[-1]
        return cls(
            lambda text: signatures["serving_default"](text=text),
            lambda text: signatures["translate_nbest"](text=text),
            lambda text: signatures["translate_with_attention"](text=text),
            int(nbest) if nbest is not None else None,
            loaded,
        )

    def translate_all(self, texts, batch_size=BATCH_SIZE):
        """The best translation of every text, translated `batch_size` at a time in
        order (the same batches wherever a file is scored)."""
        texts = list(texts)
        translations = []
        for start in range(0, len(texts), batch_size):
            translations += [h[0][0] for h in self.translate(texts[start : start + batch_size])]
        return translations

    def translate(self, texts, nbest=1):
        """Returns, per text, a list of `nbest` `(translation, score)`, best first."""
        texts = tf.constant(list(texts), dtype=tf.string)
        if nbest == 1:
            output = _run(self._translate, texts)
            return [
                [(text, float(score))]
                for text, score in zip(_strings(output["translation"]), output["score"].numpy())
            ]
        if self.beam_size is not None and nbest > self.beam_size:
            raise ValueError(f"nbest={nbest} exceeds the beam size {self.beam_size}.")
        output = _run(self._translate_nbest, texts)
        translations = np.asarray(output["translations"])
        scores = output["scores"].numpy()
        return [
            list(zip(_strings(row[:nbest]), [float(s) for s in score_row[:nbest]]))
            for row, score_row in zip(translations, scores)
        ]

    def translate_with_attention(self, texts):
        """Returns, per text, a dict with translation, score, attention `[target, source]`
        and the source and target pieces labelling its axes."""
        output = _run(self._translate_with_attention, tf.constant(list(texts), dtype=tf.string))
        results = []
        for row in range(len(texts)):
            source_length = int(output["source_length"][row])
            target_length = int(output["target_length"][row])
            results.append(
                {
                    "translation": _strings(output["translation"][row])[0],
                    "score": float(output["score"][row]),
                    "attention": output["attention"][row, :target_length, :source_length].numpy(),
                    "source_pieces": _strings(output["source_pieces"][row, :source_length]),
                    "target_pieces": _strings(output["target_pieces"][row, :target_length]),
                }
            )
        return results
