"""Tests of the family comparison's helpers (`convs2s_tf.models.posenet.comparison`)."""

import keras
import pytest
from helpers.subprocesses import ROOT

from convs2s_tf.models.posenet.comparison import (
    epoch_token_rates,
    equal_updates_budget,
    expanded_flagfile,
    format_arms_table,
    median_token_rate,
    trainable_parameters,
)


def test_a_shared_weight_is_counted_once():
    shared = keras.layers.Dense(3)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, shared(keras.layers.Dense(4)(shared(inputs)[:, :1] * inputs)))
    # Dense(4) on 4 inputs: 20; the shared Dense(3): 15, once.
    assert trainable_parameters(model) == 35


def test_rates_are_read_from_epoch_lines_only():
    console = "\n".join(
        [
            "step 10 | train 99 tok/s",
            "epoch   1 | loss 4.20 | train 1,200 tok/s | valid 3.9",
            "epoch  12 | loss 3.10 | train 1,400 tok/s",
        ]
    )
    assert epoch_token_rates(console) == [1200, 1400]
    assert median_token_rate(console) == 1300


def test_table_leaves_out_the_flagfile_and_names_the_arms():
    table = format_arms_table(
        {
            "convs2s": {"flagfile": "a.cfg", "bleu": 39.1, "ok": True},
            "posenet": {"flagfile": "b.cfg", "bleu": 37.9, "ok": None},
        }
    ).splitlines()
    assert table[0].split() == ["convs2s", "posenet"]
    assert [line.split() for line in table[1:]] == [
        ["bleu", "39.1", "37.9"],
        ["ok", "True", "None"],
    ]


def test_an_equal_updates_budget_stretches_the_real_configs_time():
    # The paper arm's flagfile takes its budget from the config it includes.
    paper = expanded_flagfile("configs/posenet_paper_multi30k.cfg", ROOT)
    assert not any(line.startswith("--flagfile") for line in paper.splitlines())
    assert paper.endswith("--model_dir=runs/posenet_paper_multi30k\n")
    budget = equal_updates_budget(paper, reference_updates=6900, updates=3000)
    assert budget == {"max_train_minutes": 133.4, "anneal_final_minutes": 11.5}
    with pytest.raises(ValueError, match="max_train_minutes"):
        equal_updates_budget("--max_epochs=3\n", 6900, 3000)
