#!/usr/bin/env python3
"""Write the ONNX backend conformance test data for burnc.

Usage: scripts/gen_conformance.py OUT_DIR [--force]

Layout written (the layout of onnx's own onnx/backend/test/data/<suite> folders):

  OUT_DIR/node/<case>/model.onnx
  OUT_DIR/node/<case>/test_data_set_0/input_<j>.pb    j = graph input order
  OUT_DIR/node/<case>/test_data_set_0/output_<j>.pb   j = graph output order
  OUT_DIR/node/<case>/meta.json   {"op", "domain", "opset", "opsets", "expanded", "rtol", "atol"}
  OUT_DIR/{simple,pytorch-converted,pytorch-operator}/<case>/...  (copied from the wheel)
  OUT_DIR/light/light_<model>/model.onnx + test_data_set_0/{input_0,output_0}.pb + meta.json
  OUT_DIR/.stamp

Node cases come from onnx.backend.test.case.node.collect_testcases(None) and are
written by onnx's own writer (onnx/backend/test/cmd_tools.py:generate_data), so
tensors are TensorProto, sequences SequenceProto and optionals OptionalProto, exactly
as in onnx's shipped data.

The wheel stores the light models flat (light/light_<m>.onnx + light_<m>_output_0.pb,
no input file); the input is recreated the way onnx's backend runner does it
(arange(n)/n in float32, unknown dims -> 1), which is the input the stored output
was computed from. Note: these stock light models have constant 0.02 weights and
their outputs are uniform; see gen_light_random.py for random-weight variants.

Does nothing when OUT_DIR/.stamp matches (onnx version, generator version).
"""

from __future__ import annotations

import os
import subprocess
import sys

ONNX_VERSION = "1.23.2"
ORT_VERSION = "1.32.0"
# Bump when the layout or content written by this script changes.
GENERATOR_VERSION = 2

MODEL_SUITES = ("simple", "pytorch-converted", "pytorch-operator")
ALL_SUITES = ("node", *MODEL_SUITES, "light")


def _ensure_python_deps() -> None:
    """Install scripts/requirements.txt (via setup_python.sh) unless already there."""
    try:
        import numpy  # noqa: F401
        import onnx
        import onnxruntime

        if (onnx.__version__, onnxruntime.__version__) == (ONNX_VERSION, ORT_VERSION):
            return
    except ImportError:
        pass
    if os.environ.get("BURNC_PY_SETUP_DONE"):
        sys.exit("python packages still missing after scripts/setup_python.sh")
    setup = os.path.join(os.path.dirname(os.path.abspath(__file__)), "setup_python.sh")
    subprocess.check_call(["bash", setup], env={**os.environ, "PYTHON": sys.executable})
    env = {**os.environ, "BURNC_PY_SETUP_DONE": "1"}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


_ensure_python_deps()

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.backend.test.case.model as model_cases  # noqa: E402
import onnx.backend.test.case.node as node_cases  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test import cmd_tools  # noqa: E402

WHEEL_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
EXPANDED_RE = re.compile(r"^(?P<base>.*)_expanded(_ver\d+)?$")


def stamp_text() -> str:
    return f"onnx={onnx.__version__} generator={GENERATOR_VERSION}\n"


def count_cases(suite_dir: str) -> int:
    if not os.path.isdir(suite_dir):
        return 0
    return sum(
        os.path.isfile(os.path.join(suite_dir, d, "model.onnx"))
        for d in os.listdir(suite_dir)
    )


def ai_onnx_opset(model: onnx.ModelProto) -> int | None:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return None


def first_real_node(model: onnx.ModelProto) -> onnx.NodeProto | None:
    for node in model.graph.node:
        if node.op_type != "Constant":
            return node
    return model.graph.node[0] if model.graph.node else None


def gen_node(out_dir: str) -> int:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    # onnx's own data writer; it iterates model_cases.collect_testcases(), so hand
    # it the node cases instead (it writes to <output>/<case.kind>/<case.name>).
    with mock.patch.object(cmd_tools.model_test, "collect_testcases", lambda: cases):
        cmd_tools.generate_data(argparse.Namespace(output=out_dir))

    by_name = {c.name: c for c in cases}
    for case in cases:
        m = EXPANDED_RE.match(case.name)
        base = by_name.get(m.group("base")) if m else None
        # A non-expanded node case is a single node; an expanded one is the function
        # body of the base case's node (first node may be a Constant).
        node = first_real_node(base.model if base is not None else case.model)
        meta = {
            "op": node.op_type if node is not None else None,
            "domain": node.domain if node is not None else "",
            "opset": ai_onnx_opset(case.model),
            "opsets": {i.domain or "ai.onnx": i.version for i in case.model.opset_import},
            "expanded": m is not None,
            "rtol": case.rtol,
            "atol": case.atol,
        }
        with open(os.path.join(out_dir, "node", case.name, "meta.json"), "w") as f:
            json.dump(meta, f, sort_keys=True)
            f.write("\n")
    return len(cases)


def copy_model_suite(suite: str, out_dir: str) -> None:
    shutil.copytree(
        os.path.join(WHEEL_DATA, suite),
        os.path.join(out_dir, suite),
        ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.pyc"),
    )


def gen_light(out_dir: str) -> None:
    """light/light_<m>.onnx (flat in the wheel) -> light/light_<m>/ case folders."""
    tolerances = {
        c.model_name: (c.rtol, c.atol)
        for c in model_cases.collect_testcases()
        if c.kind == "real"
    }
    src = os.path.join(WHEEL_DATA, "light")
    for fname in sorted(os.listdir(src)):
        if not (fname.startswith("light_") and fname.endswith(".onnx")):
            continue
        stem = fname[: -len(".onnx")]
        case_dir = os.path.join(out_dir, "light", stem)
        ds_dir = os.path.join(case_dir, "test_data_set_0")
        os.makedirs(ds_dir)
        shutil.copyfile(os.path.join(src, fname), os.path.join(case_dir, "model.onnx"))
        model = onnx.load(os.path.join(src, fname))
        inits = {i.name for i in model.graph.initializer}
        # IR 3 models: initializers are graph inputs too; data inputs are the rest.
        data_inputs = [i for i in model.graph.input if i.name not in inits]
        for j, vi in enumerate(data_inputs):
            # Same input as onnx's runner (BackendTest.generate_dummy_data, random=False).
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else 1
                for d in vi.type.tensor_type.shape.dim
            )
            n = int(np.prod(shape))
            value = (np.arange(n).reshape(shape) / n).astype(np.float32)
            with open(os.path.join(ds_dir, f"input_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, vi.name).SerializeToString())
        for j in range(len(model.graph.output)):
            shutil.copyfile(
                os.path.join(src, f"{stem}_output_{j}.pb"),
                os.path.join(ds_dir, f"output_{j}.pb"),
            )
        rtol, atol = tolerances.get(stem[len("light_") :], (1e-3, 1e-7))
        meta = {
            "rtol": rtol,
            "atol": atol,
            "inputs": [vi.name for vi in data_inputs],
            "note": "IR3 model: initializers are also graph inputs; input_<j> is the "
            "j-th graph input that has no initializer",
        }
        with open(os.path.join(case_dir, "meta.json"), "w") as f:
            json.dump(meta, f, sort_keys=True)
            f.write("\n")


def print_counts(out_dir: str) -> None:
    for suite in ALL_SUITES:
        print(f"{suite:>18}: {count_cases(os.path.join(out_dir, suite))} cases")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--force", action="store_true", help="regenerate even if stamped")
    args = ap.parse_args()
    out_dir = os.path.abspath(args.out_dir)
    stamp = os.path.join(out_dir, ".stamp")

    if not args.force and os.path.isfile(stamp):
        with open(stamp) as f:
            if f.read() == stamp_text():
                print(f"{out_dir}: up to date ({stamp_text().strip()})")
                print_counts(out_dir)
                return

    t0 = time.time()
    os.makedirs(out_dir, exist_ok=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    for suite in ALL_SUITES:  # leaves other folders (e.g. light_random) alone
        shutil.rmtree(os.path.join(out_dir, suite), ignore_errors=True)

    n_node = gen_node(out_dir)
    for suite in MODEL_SUITES:
        copy_model_suite(suite, out_dir)
    gen_light(out_dir)

    assert count_cases(os.path.join(out_dir, "node")) == n_node
    with open(stamp, "w") as f:
        f.write(stamp_text())
    print(f"wrote {out_dir} in {time.time() - t0:.1f}s (onnx {onnx.__version__})")
    print_counts(out_dir)


if __name__ == "__main__":
    main()
