"""The second part of a search step: which candidates continue and which finish.

As in the authors' implementation, each step ranks `2 k` candidates per sentence by
cumulative log-probability; candidates ending in `</s>` that rank within the first `k`
are finished, with score `cumulative / length ** alpha` (`length` counting `</s>`), and
the first `k` candidates not ending in `</s>` continue. A sentence is done once it holds
`k` finished hypotheses.
"""

import collections

import tensorflow as tf

from convs2s_tf.decoding.step_constants import NEG_INF, StepConstants
from convs2s_tf.vocabulary import EOS_ID

Selection = collections.namedtuple(
    "Selection",
    [
        "alive_scores",
        "alive_beams",
        "next_tokens",
        "finished_count",
        "slot_filled",
        "finish_beams",
        "finish_scores",
    ],
)
Selection.__doc__ = """What one search step decides, in fixed shapes.

Fields (`[sentences, k]` each but `finished_count`):
    alive_scores: float32 cumulative log-probabilities of the continuing hypotheses
        (-inf where too few candidates continue).
    alive_beams: int32, the hypothesis (`0..k-1`) each continuing one extends.
    next_tokens: int32, its new token.
    finished_count: `[sentences]` int32 finished hypotheses after the step (at most `k`).
    slot_filled: bool, whether the step fills each finished-hypothesis slot.
    finish_beams: int32, the hypothesis a filled slot extends (with `</s>`).
    finish_scores: float32, its normalised score.
"""


def select(
    constants: StepConstants,
    log_probs: tf.Tensor,
    ids: tf.Tensor,
    alive_scores: tf.Tensor,
    finished_count: tf.Tensor,
    step: tf.Tensor,
) -> Selection:
    """The step's decisions from each hypothesis' candidates.

    Args:
        constants: The search's `StepConstants`.
        log_probs: `[sentences * k, per_row]` float32 candidates' log-probabilities, from
            `candidates`.
        ids: `[sentences * k, per_row]` int32 candidates' tokens.
        alive_scores: `[sentences, k]` float32 cumulative log-probabilities before the step.
        finished_count: `[sentences]` int32 finished hypotheses before the step.
        step: Scalar int32, the tokens each hypothesis held before the step.

    Returns:
        A `Selection`.
    """
    k, per_row, num_candidates = constants.beam_size, constants.per_row, constants.num_candidates
    sentences = tf.shape(alive_scores)[0]
    cumulative = tf.reshape(alive_scores, [-1, 1]) + log_probs
    cumulative = tf.reshape(cumulative, [sentences, k * per_row])
    candidate_scores, flat = tf.math.top_k(cumulative, k=num_candidates)
    candidate_beams = flat // per_row
    candidate_tokens = tf.gather(tf.reshape(ids, [sentences, k * per_row]), flat, batch_dims=1)
    candidate_rank = tf.range(num_candidates)[None, :]
    ended = tf.equal(candidate_tokens, EOS_ID)
    valid = candidate_scores > NEG_INF

    # Finish </s> candidates ranked within the first k, first come first served:
    # finished slot j of a sentence takes the accepted candidate numbered j.
    finishing = ended & (candidate_rank < k) & valid
    slot = finished_count[:, None] + tf.cumsum(tf.cast(finishing, tf.int32), axis=1) - 1
    accepted = finishing & (slot < k)
    slot_match = accepted[:, :, None] & tf.equal(slot[:, :, None], tf.range(k))
    slot_filled = tf.reduce_any(slot_match, axis=1)
    slot_source = tf.argmax(tf.cast(slot_match, tf.int32), axis=1, output_type=tf.int32)
    length = tf.cast(step + 1, tf.float32)
    normalised = candidate_scores / tf.pow(length, constants.length_penalty)
    finished_count = tf.minimum(
        finished_count + tf.reduce_sum(tf.cast(finishing, tf.int32), axis=1), k
    )

    # The first k candidates that do not end in </s> continue; one that does (too
    # few others) stays dead.
    dead = ended | ~valid
    _, keep = tf.math.top_k(-tf.where(dead, candidate_rank + num_candidates, candidate_rank), k)
    return Selection(
        alive_scores=tf.where(
            tf.gather(dead, keep, batch_dims=1),
            NEG_INF,
            tf.gather(candidate_scores, keep, batch_dims=1),
        ),
        alive_beams=tf.gather(candidate_beams, keep, batch_dims=1),
        next_tokens=tf.gather(candidate_tokens, keep, batch_dims=1),
        finished_count=finished_count,
        slot_filled=slot_filled,
        finish_beams=tf.gather(candidate_beams, slot_source, batch_dims=1),
        finish_scores=tf.gather(normalised, slot_source, batch_dims=1),
    )
