"""Joint SentencePiece BPE training with the project's special-token ids.

One model is trained on the source and target training text together (joint BPE, as in
the paper's WMT setups), with `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3 (SentencePiece's
defaults would put `<unk>` at 0). Training is deterministic for the same input files:
sentence sampling is off unless `max_sentences` is set, and then seeded.

A model trained before (another data directory's, a teacher's) can be installed instead
(`install_bpe_model`), so that new text is tokenised into the same ids.
"""

import os
import shutil
from collections.abc import Sequence

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from convs2s_tf import vocabulary
from convs2s_tf.data.errors import SentencePieceModelError

MODEL_TYPE = "bpe"


def train_bpe(
    input_files: Sequence[str],
    model_prefix: str,
    vocab_size: int,
    *,
    character_coverage: float = 1.0,
    max_sentences: int = 0,
    seed: int = 1,
    num_threads: int | None = None,
) -> tuple[str, str]:
    """Trains a joint BPE SentencePiece model; returns (model path, vocabulary path).

    Args:
        input_files: text files, one sentence per line (all languages together).
        model_prefix: output path prefix; writes `{prefix}.model` and `{prefix}.vocab`
            (one "piece<TAB>score" line per id).
        vocab_size: total vocabulary size, special tokens included.
        character_coverage: share of characters covered by the model; rarer ones map to
            `<unk>`. 1.0 suits alphabetic languages.
        max_sentences: train on a seeded sample of this many sentences (0: all of them;
            a sample keeps memory bounded on WMT-sized corpora).
        seed: random seed for that sample.
        num_threads: trainer threads (default: CPU count).

    Raises:
        ValueError: `vocab_size` is too large for the text (message says the maximum).
    """
    if vocab_size <= vocabulary.NUM_SPECIAL_TOKENS:
        raise ValueError(
            f"vocab_size must exceed {vocabulary.NUM_SPECIAL_TOKENS}, got {vocab_size}."
        )
    # Sampling is the trainer's only randomness; seed it even if unused.
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            input=",".join(input_files),
            model_prefix=model_prefix,
            model_type=MODEL_TYPE,
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=max_sentences > 0,
            bos_id=vocabulary.BOS_ID,
            pad_id=vocabulary.PAD_ID,
            eos_id=vocabulary.EOS_ID,
            unk_id=vocabulary.UNK_ID,
            bos_piece=vocabulary.BOS_PIECE,
            pad_piece=vocabulary.PAD_PIECE,
            eos_piece=vocabulary.EOS_PIECE,
            unk_piece=vocabulary.UNK_PIECE,
            num_threads=num_threads or os.cpu_count() or 1,
            # The trainer logs every merge at INFO; warnings are enough here.
            minloglevel=1,
        )
    except RuntimeError as error:
        if "Vocabulary size too high" in str(error):
            raise ValueError(f"{error} (lower `vocab_size` for this corpus)") from error
        raise
    model_path = f"{model_prefix}.model"
    _strip_directories(model_path)
    return model_path, f"{model_prefix}.vocab"


def _strip_directories(model_path: str) -> None:
    """Rewrites the model with file names instead of paths in its recorded trainer options.

    The model proto records the training command's input files and output prefix; keeping
    only their base names makes the model bytes depend on the text, not on where the data
    directory happens to be.
    """
    model = sentencepiece_model_pb2.ModelProto()
    with open(model_path, "rb") as model_file:
        model.ParseFromString(model_file.read())
    inputs = [os.path.basename(path) for path in model.trainer_spec.input]
    del model.trainer_spec.input[:]
    model.trainer_spec.input.extend(inputs)
    model.trainer_spec.model_prefix = os.path.basename(model.trainer_spec.model_prefix)
    with open(model_path, "wb") as model_file:
        model_file.write(model.SerializeToString())


def check_special_ids(processor: spm.SentencePieceProcessor) -> None:
    """Raises ValueError unless the model's special pieces sit at the project's ids."""
    expected = {
        vocabulary.BOS_ID: vocabulary.BOS_PIECE,
        vocabulary.PAD_ID: vocabulary.PAD_PIECE,
        vocabulary.EOS_ID: vocabulary.EOS_PIECE,
        vocabulary.UNK_ID: vocabulary.UNK_PIECE,
    }
    found = {piece_id: processor.id_to_piece(piece_id) for piece_id in expected}
    if found != expected:
        raise ValueError(
            f"SentencePiece model has special pieces {found}, expected {expected}; train it "
            "with convs2s_tf.data.bpe.train_bpe."
        )


def load_bpe_model(model_path: str) -> spm.SentencePieceProcessor:
    """Loads an existing SentencePiece model, checked for the project's special ids.

    Raises:
        FileNotFoundError: There is no file at `model_path`.
        SentencePieceModelError: It is no SentencePiece model, or its special pieces are
            not at the project's ids.
    """
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"The SentencePiece model {model_path} does not exist.")
    try:
        processor = spm.SentencePieceProcessor(model_file=model_path)
    except (OSError, RuntimeError) as error:
        raise SentencePieceModelError(
            f"{model_path} is not a SentencePiece model ({error})."
        ) from None
    try:
        check_special_ids(processor)
    except ValueError as error:
        raise SentencePieceModelError(f"{model_path}: {error}") from None
    return processor


def install_bpe_model(model_path: str, model_prefix: str) -> spm.SentencePieceProcessor:
    """Copies an existing model to `{model_prefix}.model` and its vocabulary to
    `{model_prefix}.vocab` (the `.vocab` file beside the model, else written from the
    model: one "piece<TAB>score" line per id); returns the model, loaded.

    Raises:
        FileNotFoundError, SentencePieceModelError: See `load_bpe_model`.
    """
    processor = load_bpe_model(model_path)
    shutil.copyfile(model_path, f"{model_prefix}.model")
    vocabulary_path = os.path.splitext(model_path)[0] + ".vocab"
    if os.path.isfile(vocabulary_path):
        shutil.copyfile(vocabulary_path, f"{model_prefix}.vocab")
        return processor
    with open(f"{model_prefix}.vocab", "w", encoding="utf-8", newline="\n") as file:
        for piece_id in range(processor.get_piece_size()):
            piece, score = processor.id_to_piece(piece_id), processor.get_score(piece_id)
            file.write(f"{piece}\t{score:g}\n")
    return processor
