"""Exports the TensorFlow/Keras models of tests/exported_models.rs to ONNX with tf2onnx.

TensorFlow and tf2onnx are not in CI: this ran once in a virtualenv (`pip install
tensorflow-cpu==2.21.0 tf2onnx==1.17.0`, then `python export_tf.py OUTDIR`) and the .onnx files
are committed. tf2onnx's `from_keras` does not work with Keras 3, so each model is wrapped in a
`tf.function` and converted with `from_function`. Dims given as None in the input signature
(batch, height, width, sequence) stay symbolic in the ONNX file. Which (model, opset) pairs
exported is listed in exported.json, with the input sizes the tests run. Weights are seeded.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
import tf2onnx

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
tf.keras.utils.set_random_seed(0)
L = tf.keras.layers


def randomize_bn(model):
    """Non-trivial BatchNorm statistics, so folding them is tested."""
    rng = np.random.default_rng(1)
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            g, b, m, v = layer.get_weights()
            layer.set_weights([g + rng.uniform(-0.3, 0.3, g.shape), b + rng.uniform(-0.3, 0.3, b.shape),
                               rng.uniform(-0.5, 0.5, m.shape), rng.uniform(0.5, 1.5, v.shape)])


def cnn():
    """NHWC conv net: Conv/BN/ReLU/MaxPool, a depthwise-separable block, global pooling, Dense.
    tf2onnx wraps the NHWC convolutions in Transposes."""
    x = L.Input((None, None, 3))
    h = L.Conv2D(8, 3, padding="same")(x)
    h = L.BatchNormalization()(h)
    h = L.ReLU()(h)
    h = L.MaxPooling2D(2)(h)
    h = L.DepthwiseConv2D(3, padding="same", activation="relu6")(h)
    h = L.Conv2D(16, 1, strides=2, activation="swish")(h)
    h = L.GlobalAveragePooling2D()(h)
    y = L.Dense(5, activation="softmax")(h)
    m = tf.keras.Model(x, y)
    randomize_bn(m)
    return m, (None, None, None, 3)


def lstm():
    """An LSTM over a dynamic sequence, its last state through a Dense head."""
    x = L.Input((None, 4))
    h = L.LSTM(8)(x)
    y = L.Dense(3)(h)
    return tf.keras.Model(x, y), (None, None, 4)


def attention():
    """Self-attention (Keras MultiHeadAttention) + residual LayerNorm + GELU feed-forward over a
    dynamic sequence, mean-pooled. (The tanh GELU: Keras 3's exact one uses Erfc, which tf2onnx
    leaves in the graph although ONNX has no such op.)"""
    x = L.Input((None, 8))
    a = L.MultiHeadAttention(num_heads=2, key_dim=4)(x, x)
    h = L.LayerNormalization()(x + a)
    f = L.Dense(16, activation=lambda t: tf.nn.gelu(t, approximate=True))(h)
    h = L.LayerNormalization()(h + L.Dense(8)(f))
    y = L.Dense(2)(L.GlobalAveragePooling1D()(h))
    return tf.keras.Model(x, y), (None, None, 8)


class Resize(tf.keras.Model):
    """Bilinear resize of a dynamic-size NHWC image to twice its size (the target size computed
    from tf.shape: a shape subgraph), nearest upsampling, a 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.conv = L.Conv2D(3, 1)

    def call(self, x):
        s = tf.shape(x)[1:3] * 2
        a = tf.image.resize(x, s, method="bilinear")
        b = tf.image.resize(x, s, method="nearest")
        return self.conv(a + b)


def resize():
    m = Resize()
    m(tf.zeros((1, 4, 4, 2)))
    return m, (None, None, None, 2)


class Flatten(tf.keras.Model):
    """tf.reshape(x, [tf.shape(x)[0], -1]) (a shape subgraph), Dense, tanh, reduce_max."""

    def __init__(self):
        super().__init__()
        self.d1 = L.Dense(16)
        self.d2 = L.Dense(4)

    def call(self, x):
        h = tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
        h = tf.tanh(self.d1(h))
        return self.d2(h) - tf.reduce_max(h, axis=1, keepdims=True)


def flatten():
    m = Flatten()
    m(tf.zeros((1, 3, 5)))
    return m, (None, 3, 5)


# name: (builder, opsets, input sizes the tests run)
MODELS = {
    "tf_cnn": (cnn, [9, 13, 17], [[1, 16, 16, 3], [2, 12, 20, 3], [3, 9, 9, 3]]),
    "tf_lstm": (lstm, [9, 13, 18], [[1, 6, 4], [3, 2, 4], [2, 11, 4]]),
    "tf_attention": (attention, [13, 17], [[1, 5, 8], [2, 9, 8], [3, 2, 8]]),
    "tf_resize": (resize, [11, 13, 18], [[1, 4, 4, 2], [2, 5, 3, 2], [1, 7, 9, 2]]),
    "tf_flatten": (flatten, [9, 13], [[1, 3, 5], [4, 3, 5], [7, 3, 5]]),
}



def file_opset(path):
    """The default-domain opset the file declares (an exporter may raise the one asked for)."""
    import onnx
    return next(o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx"))


done = []
for name, (build, opsets, sizes) in MODELS.items():
    model, shape = build()
    spec = (tf.TensorSpec(shape, tf.float32, name="x"),)
    fn = tf.function(lambda x, model=model: model(x), input_signature=spec)
    for opset in opsets:
        path = os.path.join(out, f"{name}_op{opset}.onnx")
        try:
            tf2onnx.convert.from_function(fn, input_signature=spec, opset=opset, output_path=path)
            done.append({"model": name, "opset": file_opset(path), "asked_opset": opset, "file": os.path.basename(path), "exporter": f"tf2onnx {tf2onnx.__version__}", "sizes": sizes})
            print("ok", path, os.path.getsize(path))
        except Exception as e:  # an opset tf2onnx cannot target for these ops: record and go on
            print("FAILED", name, opset, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")

with open(os.path.join(out, "exported.json"), "w") as f:
    json.dump({"tensorflow": tf.__version__, "tf2onnx": tf2onnx.__version__, "models": done}, f, indent=1)
print("tensorflow", tf.__version__, len(done), "models")
