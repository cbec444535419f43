"""Interoperability with the authors' implementation: fairseq `fconv` checkpoints and
dictionaries, read (`fairseq_fconv.convert_checkpoint`) and written
(`fairseq_export.export_run`), and translation with token vocabularies instead of
SentencePiece ids.

PyTorch is imported only when a checkpoint is read or written.
"""

from convs2s_tf.interop.fairseq_dictionary import Dictionary, DictionaryError
from convs2s_tf.interop.vocabulary_tokenizer import (
    VocabularyError,
    VocabularyTokenizer,
    run_dictionaries,
    tokenizer_for_run,
)

__all__ = [
    "Dictionary",
    "DictionaryError",
    "VocabularyError",
    "VocabularyTokenizer",
    "run_dictionaries",
    "tokenizer_for_run",
]
