"""convs2s_tf: Convolutional Sequence to Sequence translation in TensorFlow/Keras."""

import os

# The library is written against Keras 3 on TensorFlow (tf.data, tf-text, TF Serving).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"
