"""Sends translation requests to TF Serving (or pipelines.serve) over gRPC.

    python -m pipelines.client --server=127.0.0.1:8500 --model_name=multi30k_en_de \\
        "A dog runs through the grass." "Two men are talking."

Prints one line per sentence: the translation, a tab, and its score (for the default
signature); other signatures print every output.
"""

import sys

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags

flags.DEFINE_string("server", "127.0.0.1:8500", "host:port of the gRPC PredictionService.")
flags.DEFINE_string("model_name", None, "Model name (ModelSpec.name).")
flags.DEFINE_string("signature_name", "serving_default", "Signature to call.")
flags.DEFINE_float("timeout", 30.0, "Seconds before the request fails.")
flags.mark_flag_as_required("model_name")
FLAGS = flags.FLAGS
# The shared flags are defined too so that an experiment's flagfile is accepted; the
# flags above, defined here, are this pipeline's key flags.
pipeline_flags.declare_key_flags()


def main(argv):
    texts = argv[1:] or [line.rstrip("\n") for line in sys.stdin]
    if not texts:
        raise app.UsageError("Give sentences as arguments or on stdin.")
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    from convs2s_tf.serving.client import predict

    with grpc.insecure_channel(FLAGS.server) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            outputs = predict(stub, FLAGS.model_name, texts, FLAGS.signature_name, FLAGS.timeout)
        except grpc.RpcError as error:
            print(f"client: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
    if set(outputs) == {"translation", "score"}:
        for text, score in zip(outputs["translation"], outputs["score"]):
            print(f"{text.decode('utf-8')}\t{score:.4f}")
    else:
        for key, value in sorted(outputs.items()):
            print(f"{key}: {value.tolist()}")
    return 0


if __name__ == "__main__":
    cli.run(main)
