"""Data preparation: outputs, summary, fingerprint no-op, errors (convs2s_tf.data.prepare)."""

import gzip
import json
import os

import pytest
import sentencepiece as spm

from convs2s_tf.data.cleaning import CleaningConfig, CleaningReport, clean_pairs
from convs2s_tf.data.errors import (
    CorpusFileNotFoundError,
    InvalidUtf8Error,
    SentencePieceModelError,
)
from convs2s_tf.data.prepare import PrepareConfig, PreparedData, prepare_data


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_outputs_and_summary(small_corpus, small_prepared):
    data = small_prepared.data
    assert not small_prepared.reused
    summary = json.load(open(os.path.join(data.data_dir, "summary.json"), encoding="utf-8"))
    assert summary == small_prepared.summary
    assert (summary["source_lang"], summary["target_lang"], summary["vocab_size"]) == (
        "en",
        "de",
        500,
    )
    # The training split is cleaned exactly as the cleaning rules say.
    raw = list(
        zip(
            read_lines(small_corpus["train"] + ".en.gz"),
            read_lines(small_corpus["train"] + ".de.gz"),
        )
    )
    report = CleaningReport()
    kept = list(clean_pairs(raw, CleaningConfig(), report))
    train = summary["splits"]["train"]
    assert train["pairs_read"] == 2000
    assert train["pairs_kept"] == len(kept) == 2000 - train["pairs_dropped"]
    assert train["dropped_by_rule"] == report.as_dict()["dropped_by_rule"]
    assert train["dropped_by_rule"]["length_ratio"] > 0  # real data does break the ratio rule
    source_path, target_path = data.split_paths("train")
    assert list(zip(read_lines(source_path), read_lines(target_path))) == kept
    # Evaluation splits are kept whole.
    for split in ("validation", "test"):
        assert (
            summary["splits"][split]["pairs_kept"] == summary["splits"][split]["pairs_read"] == 200
        )
    # Token counts and lengths agree with the model.
    processor = spm.SentencePieceProcessor(model_file=data.sentencepiece_model_path)
    lengths = [len(ids) for ids in processor.encode([source for source, _ in kept])]
    assert train["source"]["tokens"] == sum(lengths)
    assert train["source"]["length_pieces"]["max"] == max(lengths)
    assert train["source"]["sentences"] == len(kept)
    assert set(train["source"]["length_pieces"]) == {"mean", "p50", "p90", "p95", "p99", "max"}
    assert os.path.isfile(data.vocabulary_path)
    assert PreparedData.load(data.data_dir) == data


def test_rerun_is_a_no_op_until_inputs_or_flags_change(small_corpus, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    prefixes = {}
    for split, prefix in small_corpus.items():
        for language in ("en", "de"):
            suffix = ".gz" if split == "train" else ""
            lines = read_lines(f"{prefix}.{language}{suffix}")[:300]
            (corpus / f"{split}.{language}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        prefixes[split] = str(corpus / split)
    config = PrepareConfig(
        data_dir=str(tmp_path / "data"), dataset="local", split_prefixes=prefixes, vocab_size=300
    )
    first = prepare_data(config)
    version = first.data.data_dir
    assert os.path.dirname(version) == config.data_dir
    assert sorted(os.listdir(config.data_dir)) == ["fingerprint.json", os.path.basename(version)]
    outputs = sorted(os.listdir(version))
    mtimes = {name: os.stat(os.path.join(version, name)).st_mtime_ns for name in outputs}

    again = prepare_data(config)
    assert again.reused and again.summary == first.summary
    assert {name: os.stat(os.path.join(version, name)).st_mtime_ns for name in outputs} == mtimes
    assert PreparedData.load(config.data_dir) == first.data

    # Another preparation is a new version; the directory points at it and the old one goes.
    changed_flag = prepare_data(PrepareConfig(**{**config.__dict__, "vocab_size": 320}))
    assert not changed_flag.reused and changed_flag.summary["vocab_size"] == 320
    assert not os.path.exists(version)
    assert PreparedData.load(config.data_dir) == changed_flag.data

    with open(prefixes["train"] + ".de", "a", encoding="utf-8") as f:
        f.write("Ein neuer Satz .\n")
    with open(prefixes["train"] + ".en", "a", encoding="utf-8") as f:
        f.write("A new sentence .\n")
    changed_input = prepare_data(PrepareConfig(**{**config.__dict__, "vocab_size": 320}))
    assert not changed_input.reused
    assert changed_input.summary["splits"]["train"]["pairs_read"] == 301

    # A missing or cut-short output is redone even though the fingerprint matches.
    version = changed_input.data.data_dir
    os.remove(os.path.join(version, "sentencepiece.model"))
    redone = prepare_data(PrepareConfig(**{**config.__dict__, "vocab_size": 320}))
    assert not redone.reused and redone.data.data_dir == version
    shard = redone.data.shard_paths("train")[0]
    os.truncate(shard, os.path.getsize(shard) - 1)
    assert not prepare_data(PrepareConfig(**{**config.__dict__, "vocab_size": 320})).reused
    assert sorted(os.listdir(config.data_dir)) == ["fingerprint.json", os.path.basename(version)]


def test_invalid_utf8_fails_or_is_replaced_and_counted(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    english = [f"A dog number {i} runs ." for i in range(60)]
    german = [f"Ein Hund Nummer {i} rennt ." for i in range(60)]
    (corpus / "train.en").write_text("\n".join(english) + "\n", encoding="utf-8")
    raw_german = "\n".join(german).encode() + b"\n"
    raw_german = raw_german.replace(b"Nummer 41", b"Nummer \xc3\x28 41")
    (corpus / "train.de").write_bytes(raw_german)
    config = PrepareConfig(
        data_dir=str(tmp_path / "data"),
        dataset="local",
        split_prefixes={"train": str(corpus / "train")},
        vocab_size=60,
    )
    with pytest.raises(InvalidUtf8Error, match=f"{corpus}/train.de, line 42"):
        prepare_data(config)
    result = prepare_data(PrepareConfig(**{**config.__dict__, "invalid_utf8": "replace"}))
    assert result.summary["invalid_utf8_lines_replaced"] == 1
    assert result.summary["splits"]["train"]["invalid_utf8_lines_replaced"] == {
        f"{corpus}/train.de": 1
    }
    assert result.data.splits == ("train",)


def test_missing_corpus_file_is_named(small_corpus, tmp_path):
    config = PrepareConfig(
        data_dir=str(tmp_path / "data"),
        dataset="local",
        split_prefixes={"train": small_corpus["train"], "test": str(tmp_path / "nowhere")},
        vocab_size=300,
    )
    with pytest.raises(CorpusFileNotFoundError, match=f"{tmp_path}/nowhere.en"):
        prepare_data(config)


def test_unprepared_directory_says_how_to_prepare(tmp_path):
    with pytest.raises(FileNotFoundError, match="pipelines.prepare_data"):
        PreparedData.load(str(tmp_path))


def test_an_existing_sentencepiece_model_tokenises_instead_of_a_new_one(small_prepared, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for language, word in (("en", "dog"), ("de", "Hund")):
        lines = [f"A {word} number {i} runs ." for i in range(40)]
        (corpus / f"train.{language}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = small_prepared.data.sentencepiece_model_path
    config = PrepareConfig(
        data_dir=str(tmp_path / "data"),
        dataset="local",
        split_prefixes={"train": str(corpus / "train")},
        vocab_size=60,
        num_shards=1,
        sentencepiece_model=model,
    )
    result = prepare_data(config)
    data = result.data
    with open(model, "rb") as given, open(data.sentencepiece_model_path, "rb") as installed:
        assert given.read() == installed.read()
    assert result.summary["vocab_size"] == small_prepared.summary["vocab_size"] == 500
    with open(small_prepared.data.vocabulary_path, "rb") as given:
        assert open(data.vocabulary_path, "rb").read() == given.read()
    options = result.summary["options"]
    assert "vocab_size" not in options and len(options["sentencepiece_model_sha256"]) == 64
    # The BPE options are unused: changing them changes nothing.
    assert prepare_data(PrepareConfig(**{**config.__dict__, "vocab_size": 70})).reused
    # The same model elsewhere is the same preparation; without a .vocab file beside it,
    # its vocabulary is written from the model.
    other = tmp_path / "other.model"
    other.write_bytes(open(model, "rb").read())
    same = PrepareConfig(**{**config.__dict__, "sentencepiece_model": str(other)})
    assert prepare_data(same).reused
    elsewhere = prepare_data(PrepareConfig(**{**same.__dict__, "data_dir": str(tmp_path / "d2")}))
    assert elsewhere.summary["fingerprint"] == result.summary["fingerprint"]
    vocabulary = open(elsewhere.data.vocabulary_path, encoding="utf-8").read().splitlines()
    assert len(vocabulary) == 500 and vocabulary[3].startswith("<unk>\t")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prepare_data(PrepareConfig(**{**config.__dict__, "sentencepiece_model": str(tmp_path)}))
    other.write_bytes(b"not a model")
    with pytest.raises(SentencePieceModelError, match="is not a SentencePiece model"):
        prepare_data(PrepareConfig(**{**config.__dict__, "sentencepiece_model": str(other)}))
