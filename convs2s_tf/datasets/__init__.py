"""TensorFlow Datasets builders for corpora shipped with convs2s_tf.

Importing a builder's package registers it with tfds, after which `tfds.load` finds it by
name, e.g. `tfds.load("multi30k/en-de", data_dir=...)`.
"""
