"""The teacher's search over one chunk of source lines: length-sorted batches, several
in flight, the best hypothesis of each line kept in the source's order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from convs2s_tf.data.cleaning import normalize_whitespace
from convs2s_tf.inference.translator import Translator, length_sorted_batches, map_in_flight


def translate_lines(
    translator: Translator,
    lines: Sequence[str],
    batch_size: int,
    in_flight: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """The teacher's best translation of each of `lines`, in their order.

    Lines of similar length share a batch (`length_sorted_batches`); a translation does
    not depend on the lines batched with it, so neither the batch size nor the chunking
    changes the result. Each translation has its whitespace normalised, so that it stays
    one line of a text file.

    Args:
        translator: The teacher's translator.
        lines: Source sentences.
        batch_size: Sentences per batch.
        in_flight: Batches searched at once (see `map_in_flight`).
        on_batch: Called with the number of sentences of each batch once it is done.
    """
    lines = list(lines)
    batches = length_sorted_batches(lines, batch_size)

    def translate_batch(indices: list[int]) -> list[list[tuple[str, float]]]:
        return translator.translate([lines[index] for index in indices])

    translations = [""] * len(lines)
    for indices, hypotheses in zip(batches, map_in_flight(translate_batch, batches, in_flight)):
        for index, nbest in zip(indices, hypotheses):
            translations[index] = normalize_whitespace(nbest[0][0])
        if on_batch is not None:
            on_batch(len(indices))
    return translations
