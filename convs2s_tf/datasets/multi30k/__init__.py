"""Multi30k (task 1) as a tfds dataset; importing this package registers `multi30k`."""

from convs2s_tf.datasets.multi30k.multi30k_dataset_builder import (
    LANGUAGES,
    SPLIT_FILE_STEMS,
    Builder,
    raw_path,
)

__all__ = ["Builder", "LANGUAGES", "SPLIT_FILE_STEMS", "raw_path"]
