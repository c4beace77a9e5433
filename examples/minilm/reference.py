#!/usr/bin/env python3
"""Independent reference for examples/minilm: all-MiniLM-L6-v2 sentence embeddings in numpy.

Reads the weights from model/model.safetensors (parsing the safetensors header itself, no
safetensors/torch/transformers packages), runs the BERT encoder, mean pooling over the attention
mask and L2 normalisation in float64, and prints one embedding per line (384 numbers).

    python3 reference.py IDS.json [model.safetensors]

IDS.json is what `minilm --ids-out IDS.json` writes: {"input_ids": [[..]], "attention_mask":
[[..]], "token_type_ids": [[..]]}, one row per sentence ("-" reads it from stdin). Tokenization
is the Rust side's, so only the model's arithmetic is compared.
"""
import json
import math
import os
import struct
import sys

import numpy as np

LAYERS, HIDDEN, HEADS, EPS = 6, 384, 12, 1e-12
DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def load_safetensors(path):
    """{name: float64 array} from a .safetensors file: 8-byte LE header length, JSON header, data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        dt = np.dtype(DTYPES[meta["dtype"]]).newbyteorder("<")
        a = np.frombuffer(raw, dtype=dt, count=(end - begin) // dt.itemsize, offset=base + begin).reshape(meta["shape"])
        out[name] = a.astype(np.float64) if meta["dtype"].startswith("F") else a
    return out


# erf, vectorised from math.erf (numpy has none; math.erf is correctly rounded enough for f64).
erf = np.vectorize(math.erf, otypes=[np.float64])


def layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * w + b


def linear(x, W, prefix):
    return x @ W[prefix + ".weight"].T + W[prefix + ".bias"]


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def embed(W, ids, mask, types):
    B, L = ids.shape
    dh = HIDDEN // HEADS
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][np.arange(L)][None] + W["embeddings.token_type_embeddings.weight"][types]
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"])
    maskf = mask.astype(np.float64)
    # Masked keys get -inf-like scores: exp underflows to exactly 0, as f32::MIN does in f32.
    bias = ((1.0 - maskf) * -1e300)[:, None, None, :]

    def heads(t):
        return t.reshape(B, L, HEADS, dh).transpose(0, 2, 1, 3)

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q = heads(linear(x, W, p + ".attention.self.query"))
        k = heads(linear(x, W, p + ".attention.self.key"))
        v = heads(linear(x, W, p + ".attention.self.value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias
        ctx = (softmax(s) @ v).transpose(0, 2, 1, 3).reshape(B, L, HIDDEN)
        x = layer_norm(x + linear(ctx, W, p + ".attention.output.dense"), W[p + ".attention.output.LayerNorm.weight"], W[p + ".attention.output.LayerNorm.bias"])
        f = linear(x, W, p + ".intermediate.dense")
        f = 0.5 * f * (1.0 + erf(f / math.sqrt(2.0)))
        x = layer_norm(x + linear(f, W, p + ".output.dense"), W[p + ".output.LayerNorm.weight"], W[p + ".output.LayerNorm.bias"])
    summed = (x * maskf[:, :, None]).sum(1)
    mean = summed / np.maximum(maskf.sum(1, keepdims=True), 1e-9)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1])
    feed = json.load(src)
    weights = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "model", "model.safetensors")
    W = load_safetensors(weights)
    ids, mask, types = (np.array(feed[k], dtype=np.int64) for k in ("input_ids", "attention_mask", "token_type_ids"))
    emb = embed(W, ids, mask, types)
    for row in emb:
        print(" ".join(repr(float(v)) for v in row))


if __name__ == "__main__":
    main()
