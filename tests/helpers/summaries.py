"""A stand-in for `SummaryLogger` that records what it is asked to write."""


class RecordingSummaries:
    """A `SummaryLogger` stand-in that records what it is asked to write."""

    def __init__(self):
        self.scalar_calls, self.translation_calls, self.images = [], [], []

    def scalars(self, split, step, values):
        self.scalar_calls.append((split, step, dict(values)))

    def translations(self, split, step, sources, hypotheses, references, count):
        self.translation_calls.append((split, step, list(sources), list(hypotheses), count))

    def attention_image(self, split, step, tag, weights, source_pieces, target_pieces):
        self.images.append((tag, weights.shape, len(source_pieces), len(target_pieces)))
