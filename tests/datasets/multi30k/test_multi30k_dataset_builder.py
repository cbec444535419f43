"""The embedded Multi30k as a tfds dataset: `tfds.load` offline, both directions."""

import pytest
import tensorflow_datasets as tfds
from helpers.corpora import multi30k_lines

import convs2s_tf.datasets.multi30k  # noqa: F401 - registers "multi30k".

SPLIT_SIZES = {"train": 29000, "validation": 1014, "test": 1000}
RAW_STEMS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    tfds.disable_progress_bar()
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.mark.parametrize("source,target", [("en", "de"), ("de", "en"), ("en", "fr"), ("fr", "en")])
def test_load_offline_in_either_direction(source, target, tfds_dir, no_network):
    name = f"multi30k/{source}-{target}"
    splits, info = tfds.load(name, data_dir=tfds_dir, as_supervised=True, with_info=True)
    assert {split: info.splits[split].num_examples for split in SPLIT_SIZES} == SPLIT_SIZES
    assert info.supervised_keys == (source, target)
    assert "Elliott" in info.citation
    for split in ("validation", "test"):
        # Published order is kept, and the pair is (source, target).
        expected = list(
            zip(*(multi30k_lines(RAW_STEMS[split], lang, 3) for lang in (source, target)))
        )
        got = [
            (s.decode("utf-8"), t.decode("utf-8")) for s, t in tfds.as_numpy(splits[split].take(3))
        ]
        assert got == expected


def test_examples_hold_both_languages(tfds_dir, no_network):
    example = next(
        iter(tfds.as_numpy(tfds.load("multi30k/en-de", split="train", data_dir=tfds_dir)))
    )
    assert set(example) == {"en", "de"}
    assert example["en"].decode("utf-8") == multi30k_lines("train", "en", 1)[0]
