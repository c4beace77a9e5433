#!/usr/bin/env python3
"""Write frontends/src/onnx/arity.rs: how many inputs and outputs each ONNX op takes, and
the type of each attribute and whether it is required, per opset, from the schemas of the
onnx package scripts/requirements.txt pins.

Usage: scripts/gen_onnx_arity.py [OUT]   (default: frontends/src/onnx/arity.rs)

The validation (frontends/src/onnx/validate.rs) refuses a node with more inputs or outputs
than its op's schema allows, or fewer than it requires, an attribute of another type than
the schema's, or a required attribute missing, as onnx's checker and onnxruntime do. Rerun after raising the pinned onnx version.
"""

from __future__ import annotations

import os
import sys

import onnx
from onnx import defs

DOMAINS = {"": "", "ai.onnx.ml": "ai.onnx.ml", "ai.onnx.preview.training": "ai.onnx.preview.training"}
MAX = 2**31 - 1


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "frontends", "src", "onnx", "arity.rs")
    rows = set()
    attrs = set()
    for s in defs.get_all_schemas_with_history():
        if s.domain not in DOMAINS or s.deprecated:
            continue
        rows.add((s.domain, s.name, s.since_version, s.min_input, min(s.max_input, MAX), s.min_output, min(s.max_output, MAX)))
        for name, a in s.attributes.items():
            attrs.add((s.domain, s.name, s.since_version, name, int(a.type), bool(a.required)))
    rows = sorted(rows)
    attrs = sorted(attrs)
    lines = [
        f"//! Inputs and outputs each ONNX op takes, per opset: written by scripts/gen_onnx_arity.py from",
        f"//! the schemas of onnx {onnx.__version__}. Do not edit: regenerate.",
        "",
        "/// (domain, op, since opset, min inputs, max inputs, min outputs, max outputs); `u32::MAX`",
        "/// is variadic. Sorted by domain, op and opset.",
        "#[rustfmt::skip]",
        "pub const ARITY: &[(&str, &str, u32, u32, u32, u32, u32)] = &[",
    ]
    for d, n, v, a, b, c, e in rows:
        b = 4294967295 if b == MAX else b
        e = 4294967295 if e == MAX else e
        lines.append(f'    ("{d}", "{n}", {v}, {a}, {b}, {c}, {e}),')
    lines.append("];")
    lines.append("")
    lines.append("/// (domain, op, since opset, attribute, AttributeProto type code, required): every attribute")
    lines.append("/// of every schema version above. Sorted like [`ARITY`].")
    lines.append("#[rustfmt::skip]")
    lines.append("pub const ATTRIBUTES: &[(&str, &str, u32, &str, i32, bool)] = &[")
    for d, n, v, name, t, r in attrs:
        lines.append(f'    ("{d}", "{n}", {v}, "{name}", {t}, {"true" if r else "false"}),')
    lines.append("];")
    lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {len(rows)} schema versions and {len(attrs)} attributes to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
