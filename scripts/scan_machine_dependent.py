#!/usr/bin/env python3
"""Find the ONNX node cases whose expected outputs depend on the machine that generated them.

Usage: scripts/scan_machine_dependent.py CONFORMANCE_DATA_DIR

The node suite's expected outputs are computed when scripts/gen_conformance.py runs, by numpy
and ml_dtypes on the machine at hand. Where the ONNX spec leaves a result undefined, numpy's
result is whatever that CPU's conversion instructions give: a float cast to an integer type
out of its range ("fixed point: undefined if OOR" in Cast's spec) differs between Intel,
Zen 4 and Zen 5 (0 on one, wrapped bits on another). This script runs every node case through
onnx's reference evaluator with Cast/CastLike instrumented and prints each case in which a
float is cast to an integer type while out of that type's range (or NaN/inf), with the count.

tests/conformance/machine_dependent.tsv lists those cases and the rule the harness applies;
this script is how that list was made and how to check it is still complete after an onnx
upgrade (a case printed here and missing from the file is a bug in the file).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops import op_cast, op_cast_like

INT_RANGES = {
    onnx.TensorProto.INT2: (-2, 1),
    onnx.TensorProto.UINT2: (0, 3),
    onnx.TensorProto.INT4: (-8, 7),
    onnx.TensorProto.UINT4: (0, 15),
    onnx.TensorProto.INT8: (-(2**7), 2**7 - 1),
    onnx.TensorProto.UINT8: (0, 2**8 - 1),
    onnx.TensorProto.INT16: (-(2**15), 2**15 - 1),
    onnx.TensorProto.UINT16: (0, 2**16 - 1),
    onnx.TensorProto.INT32: (-(2**31), 2**31 - 1),
    onnx.TensorProto.UINT32: (0, 2**32 - 1),
    onnx.TensorProto.INT64: (-(2**63), 2**63 - 1),
    onnx.TensorProto.UINT64: (0, 2**64 - 1),
}

found: list[tuple[str, int, int]] = []  # (to dtype name, out-of-range elements, elements)

_orig_cast_to = op_cast.cast_to


def _recording_cast_to(x, to, *args, **kwargs):
    rng = INT_RANGES.get(int(to))
    # Float sources: numpy floats ("f") and ml_dtypes' bfloat16/float8/float4 ("V").
    if rng is not None and isinstance(x, np.ndarray) and x.dtype.kind in "fV":
        v = x.astype(np.float64)
        with np.errstate(all="ignore"):
            t = np.trunc(v)
            bad = ~np.isfinite(v) | (t < rng[0]) | (t > rng[1])
        if bad.any():
            found.append((onnx.TensorProto.DataType.Name(int(to)), int(bad.sum()), int(v.size)))
    return _orig_cast_to(x, to, *args, **kwargs)


# CastLike imports cast_to by name: patch both modules.
op_cast.cast_to = _recording_cast_to
op_cast_like.cast_to = _recording_cast_to


def load_inputs(case_dir: str, model: onnx.ModelProto) -> dict:
    ds = os.path.join(case_dir, "test_data_set_0")
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feeds = {}
    for j, name in enumerate(names):
        p = os.path.join(ds, f"input_{j}.pb")
        if not os.path.exists(p):
            break
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        feeds[name] = numpy_helper.to_array(t)
    return feeds


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    node_dir = os.path.join(sys.argv[1], "node")
    for case in sorted(os.listdir(node_dir)):
        case_dir = os.path.join(node_dir, case)
        path = os.path.join(case_dir, "model.onnx")
        if not os.path.exists(path):
            continue
        # Only cases that cast at all are worth running.
        model = onnx.load(path)
        ops = {n.op_type for n in model.graph.node}
        for f in model.functions:
            ops |= {n.op_type for n in f.node}
        if not ops & {"Cast", "CastLike"}:
            continue
        found.clear()
        try:
            feeds = load_inputs(case_dir, model)
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                ReferenceEvaluator(model).run(None, feeds)
        except Exception as e:  # noqa: BLE001 - a case the evaluator cannot run is reported
            print(f"{case}\tcould not run: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            continue
        for to, bad, n in found:
            print(f"{case}\tfloat -> {to}: {bad} of {n} elements out of range")
    return 0


if __name__ == "__main__":
    sys.exit(main())
