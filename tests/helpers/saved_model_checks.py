"""Subprocess checks of an export that import only tensorflow and tensorflow_text.

    python -m tests.helpers.saved_model_checks load VERSION_DIR      # every signature
    python -m tests.helpers.saved_model_checks ops VERSION_DIR       # op provenance
    python -m tests.helpers.saved_model_checks cli VERSION_DIR ...   # saved_model_cli args

Each prints one JSON line. Nothing of convs2s_tf is imported, as in a serving process.
"""

import json
import os
import sys

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session


def registered_ops():
    """Names of every op registered in this process."""
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return {op.name for op in op_list.op}


CORE_OPS = registered_ops()  # before tensorflow_text registers its ops

import tensorflow_text  # noqa: E402,F401 (must precede loading the export)

TEXT_OPS = registered_ops() - CORE_OPS


def load(path):
    loaded = tf.saved_model.load(path)
    texts = json.loads(sys.stdin.read())
    results = {}
    for name in ("serving_default", "translate_nbest", "translate_with_attention"):
        outputs = loaded.signatures[name](text=tf.constant(texts))
        results[name] = {key: _jsonable(value.numpy()) for key, value in outputs.items()}
    ids = tf.constant([[5, 6, 7, 1], [8, 9, 10, 11]], tf.int32)
    outputs = loaded.signatures["translate_ids"](source_ids=ids)
    results["translate_ids"] = {key: _jsonable(value.numpy()) for key, value in outputs.items()}
    print(json.dumps(results))


def _jsonable(value):
    if value.dtype.kind in "SO":
        return [v.decode("utf-8", errors="replace") for v in value.ravel()]
    return value.tolist()


def ops(path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    used = {node.op for node in graph.node}
    functions = {function.signature.name for function in graph.library.function}
    for function in graph.library.function:
        used |= {node.op for node in function.node_def}
    used -= functions  # calls of the graph's own functions
    print(
        json.dumps(
            {
                "used": sorted(used),
                "core": sorted(used & CORE_OPS),
                "tensorflow_text": sorted(used & TEXT_OPS),
                "other": sorted(used - CORE_OPS - TEXT_OPS),
            }
        )
    )


def cli(arguments):
    from tensorflow.python.tools import saved_model_cli

    sys.argv = ["saved_model_cli", *arguments]
    saved_model_cli.main()


if __name__ == "__main__":
    command, path = sys.argv[1], sys.argv[2]
    if command == "load":
        load(path)
    elif command == "ops":
        ops(path)
    else:
        cli(sys.argv[2:])
