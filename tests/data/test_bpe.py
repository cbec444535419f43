"""Joint SentencePiece BPE training: ids, determinism, vocabulary (convs2s_tf.data.bpe)."""

import pytest
import sentencepiece as spm
from helpers.corpora import multi30k_lines
from sentencepiece import sentencepiece_model_pb2

from convs2s_tf import vocabulary
from convs2s_tf.data.bpe import check_special_ids, train_bpe


@pytest.fixture(scope="module")
def text_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bpe_text")
    paths = []
    for language in ("en", "de"):
        path = root / f"train.{language}"
        path.write_text("\n".join(multi30k_lines("train", language, 1500)) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


def test_ids_model_type_and_vocabulary_file(text_files, tmp_path):
    model_path, vocab_path = train_bpe(text_files, str(tmp_path / "spm"), 600)
    processor = spm.SentencePieceProcessor(model_file=model_path)
    assert processor.get_piece_size() == 600
    assert [processor.id_to_piece(i) for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert (processor.bos_id(), processor.pad_id(), processor.eos_id(), processor.unk_id()) == (
        vocabulary.BOS_ID,
        vocabulary.PAD_ID,
        vocabulary.EOS_ID,
        vocabulary.UNK_ID,
    )
    check_special_ids(processor)
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(open(model_path, "rb").read())
    assert model.trainer_spec.model_type == sentencepiece_model_pb2.TrainerSpec.BPE
    vocab_lines = open(vocab_path, encoding="utf-8").read().splitlines()
    assert len(vocab_lines) == 600
    assert [line.split("\t")[0] for line in vocab_lines[:4]] == ["<s>", "<pad>", "</s>", "<unk>"]
    # Joint: pieces of both languages are in the one model.
    assert processor.piece_to_id("▁Hund") != vocabulary.UNK_ID
    assert processor.piece_to_id("▁dog") != vocabulary.UNK_ID


def test_same_text_gives_identical_model_bytes_wherever_trained(text_files, tmp_path):
    models = []
    for run in ("first", "second"):
        directory = tmp_path / run
        directory.mkdir()
        copies = []
        for path in text_files:
            copy = directory / path.rsplit("/", 1)[1]
            copy.write_bytes(open(path, "rb").read())
            copies.append(str(copy))
        model_path, vocab_path = train_bpe(copies, str(directory / "spm"), 600)
        models.append((open(model_path, "rb").read(), open(vocab_path, "rb").read()))
    assert models[0] == models[1]


def test_too_large_vocabulary_says_what_to_change(text_files, tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe(text_files[:1], str(tmp_path / "spm"), 100_000)


def test_default_sentencepiece_ids_are_rejected(text_files, tmp_path):
    spm.SentencePieceTrainer.train(
        input=text_files[0], model_prefix=str(tmp_path / "default"), vocab_size=300, minloglevel=2
    )
    with pytest.raises(ValueError, match="special pieces"):
        check_special_ids(spm.SentencePieceProcessor(model_file=str(tmp_path / "default.model")))
