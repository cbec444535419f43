"""The floor of a whole batch-1 request as TensorFlow runs one: the float32 floor's
products and selection, plus what every string-in, string-out request of a SavedModel
in core TF and tf-text ops pays around them.

`benchmarks.float32_floor` times a sentence's products inside a loop of 64 steps, with
no call, no strings and no cold start: a bound on the arithmetic alone. A served request
also crosses from the caller into TensorFlow, tokenizes its string, launches a compiled
program whose first step is slower than its later ones (docs/performance.md, "The floor
of a whole request"), and detokenizes the result. `RequestFloor` times exactly that and
nothing else, per sentence, called from Python as `request_milliseconds` calls a
translator:

* a `tf.function` over a `[1]` string tensor: the export's own tokenization
  (`TranslationModule.encode_text`), then one XLA computation, then the export's own
  detokenization of as many pieces as the sentence's search has steps, returned as
  Python text;
* the XLA computation: the encoder's products at the sentence's source positions, then
  a loop of the sentence's steps, each its decoder's products at `beam` rows together
  with the attention's over the source (`float32_floor.shapes_batch1_seconds`'
  products, at the same shapes) and the beam selection of one sentence
  (`float32_floor.select_per_row`). Each product's input depends on the loop's carry,
  so nothing is hoisted; the weights are variables, read as an export reads them.

Nothing of the model's other arithmetic is done (embeddings, convolution state, GLUs,
softmaxes, residuals, bookkeeping): a bound on any request of this model in core TF and
tf-text ops timed the same way, measured as the floor is. The computation compiles once
per source length, on the first (untimed) call.
"""

import time

import numpy as np
import tensorflow as tf

from benchmarks.float32_floor import (
    _attention_widths,
    _decoder_matrices,
    _matrices,
    select_per_row,
)

# The first pieces of a vocabulary are its special tokens; the detokenized stand-in
# pieces start after them.
_FIRST_PIECE = 4


def _attention_shapes(model):
    """Per attention block, the scores' and the context's matrices as `(embed, source)`
    and `(source, embed)` shapes with the source left open."""
    return [shape for embed in _attention_widths(model) for shape in ((embed, None), (None, embed))]


class RequestFloor:
    """Batch-1 requests that do only the floor's work and what any request pays.

    Args:
        model: The `ConvS2S` whose products are timed.
        module: A `TranslationModule` of it: its tokenization and detokenization.
        beam: Rows per step.
        max_source_length: The longest source (`</s>` included) to be requested.
    """

    def __init__(self, model, module, beam, max_source_length):
        self.module = module
        self.beam = beam
        self.vocab_size = model.decoder.vocab_size
        rng = np.random.default_rng(0)

        def variable(shape):
            return tf.Variable(rng.standard_normal(shape).astype(np.float32), trainable=False)

        self.encoder_weights = [tf.Variable(m, trainable=False) for m in _matrices(model.encoder)]
        self.encoder_inputs = [
            variable([max_source_length, m.shape[0]]) for m in self.encoder_weights
        ]
        decoder = [tf.Variable(m, trainable=False) for m in _decoder_matrices(model.decoder)]
        attention = [
            variable([max_source_length if size is None else size for size in shape])
            for shape in _attention_shapes(model)
        ]
        # Which dimension of each step matrix is the source's (None: fixed).
        self.step_weights = [(w, None) for w in decoder] + [
            (w, 1 if shape[1] is None else 0)
            for w, shape in zip(attention, _attention_shapes(model))
        ]
        self.step_inputs = [variable([beam, w.shape[0]]) for w, _ in self.step_weights]
        self.scores = variable([beam, 1])
        self.logits = variable([beam, self.vocab_size])
        self._program = tf.function(self._products, jit_compile=True, autograph=False)
        self.request = tf.function(
            self._request,
            input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.int32)],
            autograph=False,
        )

    def _products(self, source, steps):
        """The XLA computation: `[steps]` stand-in piece ids, after the products."""
        positions = tf.shape(source)[1]
        carry = 1e-30 * tf.reduce_sum(tf.cast(source, tf.float32))
        for x, w in zip(self.encoder_inputs, self.encoder_weights):
            carry = carry + 1e-30 * tf.reduce_sum(tf.matmul(x[:positions] + carry, w))

        def body(step, carry):
            for x, (w, source_axis) in zip(self.step_inputs, self.step_weights):
                if source_axis == 0:
                    x, w = x[:, :positions], w[:positions]
                elif source_axis == 1:
                    w = w[:, :positions]
                carry = carry + 1e-30 * tf.reduce_sum(tf.matmul(x + carry, w))
            best = select_per_row(self.scores, self.logits + carry, 1, self.beam)
            return step + 1, carry + 1e-30 * tf.reduce_sum(best)

        carry = tf.while_loop(lambda step, _: step < steps, body, (0, carry))[1]
        return tf.range(steps) + _FIRST_PIECE + tf.cast(carry, tf.int32)

    def _request(self, text, steps):
        source = self.module.encode_text(text)
        pieces = self._program(source, steps)
        return self.module.tokenizer.decode(pieces[None, :])

    def translate(self, sentence, steps):
        """One request: `sentence`'s floor, detokenized to text."""
        return self.request(tf.constant([sentence]), tf.constant(int(steps))).numpy()[0]

    def milliseconds(self, sentences, steps):
        """Per request, its time in ms, `sentences` one at a time with their `steps`."""
        times = []
        for sentence, count in zip(sentences, steps):
            start = time.perf_counter()
            self.translate(sentence, count)
            times.append(1000.0 * (time.perf_counter() - start))
        return times

    def warm_up(self, sentences, steps):
        """Compiles the computation for every source length of `sentences`."""
        self.milliseconds(sentences, steps)
