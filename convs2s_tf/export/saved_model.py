"""Writing SavedModels in TF Serving's layout, with warm-up requests and server configs."""

import os
import re

import tensorflow as tf

from convs2s_tf.export.translation_module import TranslationModule

WARMUP_TEXTS = (
    "A man is riding a bicycle down the street.",
    "Two dogs are playing in the snow.",
    "",
    "A little girl in a pink dress is smiling at the camera.",
)

BATCHING_PARAMETERS = """\
# TF Serving batching (tensorflow_model_server --enable_batching
#   --batching_parameters_file=batching_parameters.txt): requests are merged into
# batches of up to 64 sentences, waiting at most 5 ms for more to arrive.
max_batch_size { value: 64 }
batch_timeout_micros { value: 5000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 2 }
"""


def next_version(export_dir):
    """The next free integer version under `export_dir` (1 for a new directory)."""
    versions = [
        int(name)
        for name in (tf.io.gfile.listdir(export_dir) if tf.io.gfile.isdir(export_dir) else [])
        if re.fullmatch(r"\d+/?", name)
    ]
    return max(versions, default=0) + 1


def latest_version_dir(base_path):
    """The newest `<base_path>/<version>` holding a saved_model.pb (what TF Serving serves)."""
    versions = [
        int(name.rstrip("/"))
        for name in (tf.io.gfile.listdir(base_path) if tf.io.gfile.isdir(base_path) else [])
        if re.fullmatch(r"\d+/?", name)
        and tf.io.gfile.exists(os.path.join(base_path, name.rstrip("/"), "saved_model.pb"))
    ]
    if not versions:
        raise FileNotFoundError(f"No SavedModel version under {base_path}.")
    return os.path.join(base_path, str(max(versions)))


def _write_warmup_requests(version_dir, model_name, texts):
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    directory = os.path.join(version_dir, "assets.extra")
    tf.io.gfile.makedirs(directory)
    with tf.io.TFRecordWriter(os.path.join(directory, "tf_serving_warmup_requests")) as writer:
        for batch in ([texts[0]], list(texts)):
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serving_default")
            )
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())


def write_server_configs(export_dir, model_name):
    """Writes `models.config` and `batching_parameters.txt` next to the versions."""
    config = (
        "model_config_list {\n"
        "  config {\n"
        f'    name: "{model_name}"\n'
        f'    base_path: "/models/{model_name}"\n'
        '    model_platform: "tensorflow"\n'
        "  }\n"
        "}\n"
    )
    with tf.io.gfile.GFile(os.path.join(export_dir, "models.config"), "w") as f:
        f.write(config)
    with tf.io.gfile.GFile(os.path.join(export_dir, "batching_parameters.txt"), "w") as f:
        f.write(BATCHING_PARAMETERS)


def export_translator(model, tokenizer, export_dir, search_config=None, model_name=None):
    """Exports `model` + `tokenizer` to `export_dir/<next version>/`.

    Returns:
        The version directory written.
    """
    module = TranslationModule(model, tokenizer, search_config)
    model_name = model_name or os.path.basename(os.path.normpath(export_dir))
    version_dir = os.path.join(export_dir, str(next_version(export_dir)))
    # Written under a temporary name and renamed, so a server polling export_dir never
    # sees a half-written version.
    temporary = version_dir + ".tmp"
    if tf.io.gfile.exists(temporary):
        tf.io.gfile.rmtree(temporary)
    tf.saved_model.save(module, temporary, signatures=module.signatures())
    _write_warmup_requests(temporary, model_name, WARMUP_TEXTS)
    tf.io.gfile.rename(temporary, version_dir)
    write_server_configs(export_dir, model_name)
    return version_dir
