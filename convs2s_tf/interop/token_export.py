"""SavedModels of imported models that translate token ids (no in-graph tokenizer).

An imported fairseq model without a SentencePiece model reads text tokenised outside the
graph (for the authors' WMT models: Moses tokenisation, then subword-nmt BPE). Its export
offers the `translate_ids` signature alone: `source_ids` `[batch, time]` int32 (one
sentence per row, no `</s>`, right-padded with `<pad>` = 1) in; `output_ids` (ending in
`</s>`, then `<pad>`), `length` and `score` out. The two dictionaries travel in
`assets.extra/` so that clients map tokens to ids exactly as the model does.
"""

import os

import numpy as np
import tensorflow as tf

from convs2s_tf.export import TranslationModule, next_version, write_server_configs
from convs2s_tf.interop.fairseq_dictionary import Dictionary
from convs2s_tf.vocabulary import PAD_ID

SIGNATURE = "translate_ids"
SOURCE_DICT_ASSET = "source_dict.txt"
TARGET_DICT_ASSET = "target_dict.txt"
# Warm-up batches of translate_ids (ids beyond the vocabulary become <unk>).
WARMUP_IDS = ([[4, 5, 6, 7]], [[4, 5, 6, 7], [8, 9, PAD_ID, PAD_ID]])


class TokenIdsTranslationModule(TranslationModule):
    """`TranslationModule` without a tokenizer: its `translate_ids` signature only.

    The text signatures need a tokenizer, so they are removed from the module (a
    SavedModel would otherwise trace them).
    """

    translate = None
    translate_nbest = None
    translate_with_attention = None

    def __init__(self, model, search_config=None):
        super().__init__(model, None, search_config)

    def signatures(self):
        return {SIGNATURE: self.translate_ids}


def _write_warmup_requests(version_dir, model_name):
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    directory = os.path.join(version_dir, "assets.extra")
    tf.io.gfile.makedirs(directory)
    with tf.io.TFRecordWriter(os.path.join(directory, "tf_serving_warmup_requests")) as writer:
        for batch in WARMUP_IDS:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SIGNATURE)
            )
            request.inputs["source_ids"].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.int32))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())


def export_ids_translator(
    model, export_dir, source_dict, target_dict, search_config=None, model_name=None
):
    """Exports `model` with the `translate_ids` signature to `export_dir/<next version>/`.

    Args:
        model: A built `ConvS2S`.
        export_dir: Base directory in TF Serving's layout (versions below it).
        source_dict: The source dict.txt, copied to `assets.extra/source_dict.txt`.
        target_dict: The target dict.txt, copied to `assets.extra/target_dict.txt`.
        search_config: A `SearchConfig` (default: its defaults).
        model_name: Name in `models.config` (default: the base name of `export_dir`).

    Returns:
        The version directory written.
    """
    module = TokenIdsTranslationModule(model, search_config)
    model_name = model_name or os.path.basename(os.path.normpath(export_dir))
    version_dir = os.path.join(export_dir, str(next_version(export_dir)))
    temporary = version_dir + ".tmp"
    if tf.io.gfile.exists(temporary):
        tf.io.gfile.rmtree(temporary)
    tf.saved_model.save(module, temporary, signatures=module.signatures())
    _write_warmup_requests(temporary, model_name)
    for source, name in ((source_dict, SOURCE_DICT_ASSET), (target_dict, TARGET_DICT_ASSET)):
        tf.io.gfile.copy(source, os.path.join(temporary, "assets.extra", name), overwrite=True)
    tf.io.gfile.rename(temporary, version_dir)
    write_server_configs(export_dir, model_name)
    return version_dir


def is_ids_export(path):
    """Whether the SavedModel version directory `path` was written by
    `export_ids_translator` (it carries the dictionaries)."""
    return tf.io.gfile.exists(os.path.join(path, "assets.extra", SOURCE_DICT_ASSET))


class TokenIdsTranslator:
    """Translates space-separated tokens with a `translate_ids` SavedModel.

    Tokens are mapped with the dictionaries shipped in the export's `assets.extra/`
    (unknown ones to `<unk>`), and output ids back to tokens joined by spaces: what
    `pipelines.translate` does with the checkpoint of the same run.
    """

    def __init__(self, path):
        self._loaded = tf.saved_model.load(path)
        self._translate_ids = self._loaded.signatures[SIGNATURE]
        extra = os.path.join(path, "assets.extra")
        self.source_dictionary = Dictionary.load(os.path.join(extra, SOURCE_DICT_ASSET))
        self.target_dictionary = Dictionary.load(os.path.join(extra, TARGET_DICT_ASSET))
        self.beam_size = None

    def _encode(self, texts):
        rows = [self.source_dictionary.encode_line(text) for text in texts]
        width = max([len(row) for row in rows] + [1])
        ids = np.full([len(rows), width], PAD_ID, np.int32)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = row
        return ids

    def translate(self, texts, nbest=1):
        """Returns, per text, `[(translation, score)]` (one best hypothesis)."""
        if nbest != 1:
            raise ValueError("A translate_ids export returns the best hypothesis only (nbest=1).")
        texts = list(texts)
        if not texts:
            return []
        output = self._translate_ids(source_ids=tf.constant(self._encode(texts)))
        output_ids, lengths = output["output_ids"].numpy(), output["length"].numpy()
        return [
            [(self.target_dictionary.decode_ids(row[:length]), float(score))]
            for row, length, score in zip(output_ids, lengths, output["score"].numpy())
        ]

    def translate_with_attention(self, texts):
        raise ValueError(
            "A translate_ids export has no attention signature; use --model_dir for "
            "--attention_dir."
        )
