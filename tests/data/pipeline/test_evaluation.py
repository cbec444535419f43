"""Tests of the evaluation pipeline: every pair kept, in order, with its text."""

from helpers.pipelines import epoch_pairs, expected_pairs, unpad

from convs2s_tf.data.pipeline import make_eval_dataset, max_sequence_length
from convs2s_tf.vocabulary import EOS_ID


def test_eval_keeps_every_pair_in_a_fixed_order_with_its_text(data, tokenizer):
    pairs = expected_pairs(data, "test")
    sources, references = (
        open(p, encoding="utf-8").read().splitlines() for p in data.split_paths("test")
    )
    batched = make_eval_dataset(
        *data.split_paths("test"), tokenizer, max_tokens=300, max_source_positions=18
    )
    cap = max_sequence_length(18)
    truncated = sum(len(s) > cap for s, _ in pairs)
    assert truncated > 0
    assert (batched.stats.pairs, batched.stats.pairs_kept) == (len(pairs), len(pairs))
    assert batched.stats.pairs_too_long == batched.stats.source_too_long == truncated
    first, batches = epoch_pairs(batched.dataset)
    assert epoch_pairs(batched.dataset)[0] == first  # deterministic
    seen = []
    for batch in batches:
        assert batch["source"].shape[0] * batch["source"].shape[1] <= 300
        for row in range(batch["source"].shape[0]):
            index = batch["index"][row]
            seen.append(index)
            assert batch["source_text"][row].decode() == sources[index]
            assert batch["reference_text"][row].decode() == references[index]
            source, target = pairs[index]
            if len(source) > cap:
                source = source[: cap - 1] + (EOS_ID,)
            assert unpad(batch["source"][row]) == source
            assert unpad(batch["target"][row]) == target
    assert sorted(seen) == list(range(len(pairs)))
    assert len(batches) == batched.stats.batches_per_epoch
