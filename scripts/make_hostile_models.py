#!/usr/bin/env python3
"""Hostile and malformed ONNX models for tests/hostile_models.rs.

Run: python3 scripts/make_hostile_models.py OUT_DIR

Writes OUT_DIR/<case>/model.onnx and OUT_DIR/<case>/expect.txt (plus side files: external data,
inputs as TensorProto .pb, a FIFO, a symlink). Each case folder is removed and written afresh.
The models are built with onnx.helper and never checked with onnx.checker: most are invalid on
purpose.

expect.txt, one `key=value` a line:
  expect=error | compiles   error: exit code 1, exactly one stderr line starting with `error: `;
                            compiles: exit code 0 (and, for the default command, the module
                            {out}/model.rs is written and contains no identifier `INJECTED`
                            outside comments and string literals).
  contains=SUBSTRING        (repeatable) the error line contains SUBSTRING (case-insensitive).
  cmd=ARGS                  burnc arguments, split on spaces after substitution of {model},
                            {out} and {dir} (the case folder); default `{model} -o {out}/model.rs`.
  stdout_contains=SUBSTRING (repeatable) stdout contains SUBSTRING.
  timeout=SECONDS           a tighter time limit than the test's default of 120 s.
  stderr_no_control=1       stderr holds no control character except the final newline.
  max_memory_mb=N           burnc's peak resident memory stays under N MiB (an input file that
                            never ends must be refused, not read until memory runs out).
  note=TEXT                 free text (why the case exists), ignored by the test.
Every payload meant to inject code contains the identifier INJECTED.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR = 8
F = TensorProto.FLOAT
I64 = TensorProto.INT64

CASES = []  # (name, writer)


def case(fn):
    CASES.append(fn)
    return fn


def vi(name, dims, elem=F):
    return helper.make_tensor_value_info(name, elem, dims)


def model(nodes, inputs, outputs, inits=(), opset=OPSET, ir=IR, name="hostile", **kw):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="burnc-hostile", **kw)
    m.ir_version = ir
    return m


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def f32(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


class Case:
    def __init__(self, root, name):
        self.name = name
        self.dir = os.path.join(root, name)
        if os.path.lexists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir)
        self.lines = []

    def save(self, m, expect, contains=(), cmd=None, stdout_contains=(), timeout=None, no_control=False, max_memory_mb=None, note=None):
        with open(os.path.join(self.dir, "model.onnx"), "wb") as f:
            f.write(m if isinstance(m, bytes) else m.SerializeToString())
        lines = [f"expect={expect}"]
        lines += [f"contains={c}" for c in contains]
        if cmd:
            lines.append(f"cmd={cmd}")
        lines += [f"stdout_contains={s}" for s in stdout_contains]
        if timeout:
            lines.append(f"timeout={timeout}")
        if no_control:
            lines.append("stderr_no_control=1")
        if max_memory_mb:
            lines.append(f"max_memory_mb={max_memory_mb}")
        if note:
            lines.append(f"note={note}")
        for l in lines:
            assert "\n" not in l and "\r" not in l, l
        with open(os.path.join(self.dir, "expect.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def input_pb(self, i, array):
        with open(os.path.join(self.dir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(array).SerializeToString())


def relu_model(in_name="x", out_name="y", node_name="relu", inits=(), **kw):
    return model([helper.make_node("Relu", [in_name], [out_name], name=node_name)], [vi(in_name, [4])], [vi(out_name, [4])], inits, **kw)


# ---------------------------------------------------------------------------------------------
# Code injection: names and metadata that reach the generated module. All must compile, and the
# module must hold no identifier INJECTED outside comments and strings.

LINK_PAYLOAD = 'x\n#[used] #[link_section = ".init_array"] static INJECTED: extern "C" fn() = { extern "C" fn f() {} f };\n//'


@case
def inj_input_newline(root):
    c = Case(root, "inj_input_newline")
    c.save(relu_model(in_name=LINK_PAYLOAD), "compiles", note="graph input name: newline then a static in .init_array")


@case
def inj_input_crlf(root):
    c = Case(root, "inj_input_crlf")
    c.save(relu_model(in_name="x\r\nfn INJECTED() {}\r\n//"), "compiles", note="CR LF line break in a graph input name")


@case
def inj_input_unicode_newlines(root):
    # U+2028/U+2029 are not line breaks to rustc, but NEL (U+0085) and VT/FF are whitespace; none
    # may end a `//` comment, so these must stay inert wherever the name lands.
    c = Case(root, "inj_input_unicode_newlines")
    c.save(relu_model(in_name="x\u2028fn INJECTED() {}\u0085\x0b\x0c//"), "compiles")


@case
def inj_node_name(root):
    c = Case(root, "inj_node_name")
    c.save(relu_model(node_name="conv\nlet INJECTED = 1;\n//"), "compiles", note="node name: newline then a statement")


@case
def inj_node_name_block_comment(root):
    c = Case(root, "inj_node_name_block_comment")
    c.save(relu_model(node_name="conv */ let INJECTED = 1; /*"), "compiles")


OUTPUT_PAYLOADS = {
    "newline": "y\nfn INJECTED() {}\n//",
    "block_comment_end": "y */ fn INJECTED() {} /*",
    "block_comment_open": "y /* INJECTED",
    "quote": 'y"); fn INJECTED() {} //',
    "backslash": 'y\\"); fn INJECTED() {} //',
    "backslash_end": "y\\",
    "doc_comment": "y\n/// INJECTED\n#[doc = \"\"] fn INJECTED() {}",
    "raw_string": 'y"#); fn INJECTED() {} //',
    "brace": "y}} fn INJECTED() {} {{",
}


def _output_case(kind, payload):
    def write(root):
        c = Case(root, f"inj_output_{kind}")
        c.save(relu_model(out_name=payload), "compiles", note=f"graph output name payload: {kind}")
    write.__name__ = f"inj_output_{kind}"
    return write


for _k, _p in OUTPUT_PAYLOADS.items():
    case(_output_case(_k, _p))


@case
def inj_initializer_newline(root):
    c = Case(root, "inj_initializer_newline")
    w = "w\nfn INJECTED() {}\n//"
    m = model([helper.make_node("Add", ["x", w], ["y"], name="add")], [vi("x", [4])], [vi("y", [4])], [f32(w, [1, 2, 3, 4])])
    c.save(m, "compiles", note="initializer name payload")


@case
def inj_initializer_block_comment(root):
    c = Case(root, "inj_initializer_block_comment")
    w = "w */ fn INJECTED() {} /* \" */"
    m = model([helper.make_node("Mul", ["x", w], ["y"], name="mul")], [vi("x", [4])], [vi("y", [4])], [f32(w, [1, 2, 3, 4])])
    c.save(m, "compiles")


@case
def inj_value_info_name(root):
    c = Case(root, "inj_value_info_name")
    mid = "mid\nfn INJECTED() {}\n//"
    m = model([helper.make_node("Relu", ["x"], [mid], name="r"), helper.make_node("Neg", [mid], ["y"], name="n")], [vi("x", [4])], [vi("y", [4])])
    m.graph.value_info.append(vi(mid, [4]))
    c.save(m, "compiles", note="intermediate value name payload (also in value_info)")


@case
def inj_metadata(root):
    c = Case(root, "inj_metadata")
    p = "\n*/ fn INJECTED() {} /*\n\"\\ //"
    m = relu_model(name="graph" + p, doc_string="doc" + p)
    m.producer_name = "producer" + p
    m.producer_version = "1.0" + p
    m.domain = "domain" + p
    m.graph.doc_string = "graph doc" + p
    m.graph.node[0].doc_string = "node doc" + p
    m.graph.input[0].doc_string = "input doc" + p
    m.graph.output[0].doc_string = "output doc" + p
    helper.set_model_props(m, {"key" + p: "value" + p})
    c.save(m, "compiles", note="graph name, doc strings, producer, domain, metadata_props carry payloads")


# Names that collide with what the generated module uses itself.
COLLIDING = ["arena", "part_0", "a", "w", "self", "Self", "Model", "Arena", "Outputs", "Inputs", "rt", "forward", "s", "new",
             "fn", "type", "loop", "r#type", "_", "super", "crate", "std", "core", "f32", "usize", "None", "Some", "Ok", "Err",
             "out", "input", "output", "x_0", "t0", "v0", "buf", "ARENA_BYTES", "WEIGHTS", "123", "вход", "x.y", "a b", "::"]


def _safe(name):
    s = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in name)
    return s or "empty"


def _collide_input(name):
    def write(root):
        c = Case(root, f"name_in_{_safe(name)}_{name.encode().hex()[:8]}")
        c.save(relu_model(in_name=name, node_name=name), "compiles", note=f"graph input and node named {name!r}")
    return write


def _collide_output(name):
    def write(root):
        c = Case(root, f"name_out_{_safe(name)}_{name.encode().hex()[:8]}")
        c.save(relu_model(out_name=name), "compiles", note=f"graph output named {name!r}")
    return write


for _n in COLLIDING:
    case(_collide_input(_n))
    case(_collide_output(_n))


@case
def name_all_inputs(root):
    c = Case(root, "name_all_inputs")
    names = COLLIDING
    m = model([helper.make_node("Sum", names, ["y"], name="sum")], [vi(n, [4]) for n in names], [vi("y", [4])])
    c.save(m, "compiles", note="every colliding name as a graph input of one model")


@case
def name_all_outputs(root):
    c = Case(root, "name_all_outputs")
    nodes = [helper.make_node("Relu", ["x"], [n], name=n) for n in COLLIDING]
    c.save(model(nodes, [vi("x", [4])], [vi(n, [4]) for n in COLLIDING]), "compiles", note="every colliding name as an output and a node")


INJECTIONS = ["x\n#[used] static INJECTED: u8 = 0;\n//", "y */ fn INJECTED() {} /*", "z\"); fn INJECTED() {} //", "q\u202e\u2028INJECTED"]


@case
def name_all_inputs_run(root):
    # Built and run through the generated code (`run --codegen`): the module must compile,
    # not only parse, with every colliding name and injection payload as an input.
    c = Case(root, "name_all_inputs_run")
    names = COLLIDING + INJECTIONS
    m = model([helper.make_node("Sum", names, ["y"], name="sum\nlet INJECTED = 1;\n//")], [vi(n, [4]) for n in names], [vi("y", [4])])
    for i in range(len(names)):
        c.input_pb(i, np.arange(4, dtype=np.float32))
    args = " ".join(f"--input {{dir}}/input_{i}.pb" for i in range(len(names)))
    total = 3 * len(names)
    c.save(m, "compiles", cmd=f"run {{model}} --codegen {args}", stdout_contains=[f"{total}.000000"], timeout=600,
           note="generated code built and run: every colliding name and payload as an input")


@case
def name_all_outputs_run(root):
    c = Case(root, "name_all_outputs_run")
    names = COLLIDING + INJECTIONS
    nodes = [helper.make_node("Relu", ["x"], [n], name=n) for n in names]
    c.input_pb(0, np.array([-1, 0, 1, 2], dtype=np.float32))
    c.save(model(nodes, [vi("x", [4])], [vi(n, [4]) for n in names]), "compiles", cmd="run {model} --codegen --input {dir}/input_0.pb",
           stdout_contains=["2.000000"], timeout=600, note="generated code built and run: every colliding name and payload as an output")


@case
def name_all_initializers(root):
    c = Case(root, "name_all_initializers")
    names = ["self", "arena", "w", "Model", "part_0", "forward", "WEIGHTS", "x"]
    inits = [f32(n, [1, 2, 3, 4]) for n in names[:-1]]
    m = model([helper.make_node("Sum", names, ["y"], name="sum")], [vi("x", [4])], [vi("y", [4])], inits)
    c.save(m, "compiles")


@case
def name_snake_collision_inputs(root):
    c = Case(root, "name_snake_collision_inputs")
    m = model([helper.make_node("Add", ["My-Input", "my_input"], ["y"], name="add")], [vi("My-Input", [4]), vi("my_input", [4])], [vi("y", [4])])
    c.save(m, "compiles", note="two inputs with one snake_case form")


@case
def name_snake_collision_outputs(root):
    c = Case(root, "name_snake_collision_outputs")
    nodes = [helper.make_node("Relu", ["x"], ["My-Output"], name="r1"), helper.make_node("Neg", ["x"], ["my_output"], name="r2"),
             helper.make_node("Abs", ["x"], ["MY_OUTPUT"], name="r3"), helper.make_node("Exp", ["x"], ["my.output"], name="r4")]
    c.save(model(nodes, [vi("x", [4])], [vi(n, [4]) for n in ["My-Output", "my_output", "MY_OUTPUT", "my.output"]]), "compiles")


@case
def name_snake_collision_in_out(root):
    c = Case(root, "name_snake_collision_in_out")
    nodes = [helper.make_node("Relu", ["Val-1"], ["val_1"], name="r")]
    c.save(model(nodes, [vi("Val-1", [4])], [vi("val_1", [4])]), "compiles", note="an input and an output with one snake_case form")


@case
def name_unicode_lookalike(root):
    c = Case(root, "name_unicode_lookalike")
    # Latin `a` vs Cyrillic `а`: different names, possibly one identifier after transliteration.
    m = model([helper.make_node("Add", ["a", "\u0430"], ["y"], name="add")], [vi("a", [4]), vi("\u0430", [4])], [vi("y", [4])])
    c.save(m, "compiles")


@case
def name_empty_input(root):
    c = Case(root, "name_empty_input")
    m = model([helper.make_node("Relu", [""], ["y"], name="relu_empty")], [vi("", [4])], [vi("y", [4])])
    c.save(m, "error", contains=["input"], note="a graph input with an empty name is invalid ONNX")


@case
def name_empty_output(root):
    c = Case(root, "name_empty_output")
    m = model([helper.make_node("Relu", ["x"], [""], name="relu_empty")], [vi("x", [4])], [vi("", [4])])
    c.save(m, "error", contains=["output"], note="a graph output with an empty name is invalid ONNX")


@case
def passthrough_output(root):
    c = Case(root, "passthrough_output")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [4])], [vi("x", [4]), vi("y", [4])])
    c.save(m, "compiles", note="a graph output that is a graph input")


@case
def initializer_output(root):
    c = Case(root, "initializer_output")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [4])], [vi("w", [4]), vi("y", [4])], [f32("w", [1, 2, 3, 4])])
    c.save(m, "compiles", note="a graph output that is an initializer")


# ---------------------------------------------------------------------------------------------
# Shape arithmetic that wraps or overflows: an error naming the node.

@case
def wrap_constantofshape(root):
    c = Case(root, "wrap_constantofshape")
    m = model([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="cos_huge")], [], [vi("y", None)], [i64("shape", [10**9] * 3)])
    c.save(m, "error", contains=["cos_huge"])


@case
def wrap_constantofshape_run(root):
    c = Case(root, "wrap_constantofshape_run")
    m = model([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="cos_huge")], [], [vi("y", None)], [i64("shape", [10**9] * 3)])
    c.save(m, "error", contains=["cos_huge"], cmd="run {model}")


@case
def wrap_constantofshape_bytes(root):
    c = Case(root, "wrap_constantofshape_bytes")
    # 2**62 elements fit in u64; 2**64 bytes do not.
    m = model([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="cos_bytes")], [], [vi("y", None)], [i64("shape", [2**31, 2**31])])
    c.save(m, "error", contains=["cos_bytes"])


@case
def wrap_constantofshape_negative(root):
    c = Case(root, "wrap_constantofshape_negative")
    m = model([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="cos_neg")], [], [vi("y", None)], [i64("shape", [-1, -4])])
    c.save(m, "error", contains=["cos_neg"], note="negative dims multiply to a positive count")


def _reshape_case(name, xdims, shape, run=False, note=None):
    def write(root):
        c = Case(root, name)
        m = model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_huge")], [vi("x", xdims)], [vi("y", None)], [i64("shape", shape)])
        if run:
            c.input_pb(0, np.zeros(xdims, dtype=np.float32))
            c.save(m, "error", contains=["reshape_huge"], cmd="run {model} --input {dir}/input_0.pb", note=note)
        else:
            c.save(m, "error", contains=["reshape_huge"], note=note)
    write.__name__ = name
    return write


case(_reshape_case("wrap_reshape_zero_copy", [2, 0, 3], [2**62, 4, 0], note="[2**62, 4, dim 2 = 3]: 3 * 2**64 wraps to 0 = numel"))
case(_reshape_case("wrap_reshape_2p61x8", [0, 4], [2**61, 8], note="2**64 wraps to 0 = numel of the empty input"))
case(_reshape_case("wrap_reshape_to_4", [4], [2**62 + 1, 4], note="(2**62 + 1) * 4 wraps to 4 = numel"))
case(_reshape_case("wrap_reshape_to_4_run", [4], [2**62 + 1, 4], run=True))
case(_reshape_case("wrap_reshape_infer_div0", [4], [-1, 2**62, 4], note="known dims multiply to 2**64, which wraps to 0: inferring -1 divides by 0"))
case(_reshape_case("wrap_reshape_infer_div0_run", [4], [-1, 2**62, 4], run=True))
case(_reshape_case("wrap_reshape_infer", [4], [-1, 2**62]))
case(_reshape_case("wrap_reshape_negative", [4], [-2, -2], note="two negative dims multiply to 4"))


def _reshape_slice(run):
    def write(root):
        name = "wrap_reshape_then_slice" + ("_run" if run else "")
        c = Case(root, name)
        nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape_wrap"),
                 helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["y"], name="slice_far")]
        inits = [i64("shape", [2**62 + 1, 4]), i64("starts", [2**62]), i64("ends", [2**62 + 1]), i64("axes", [0])]
        m = model(nodes, [vi("x", [4])], [vi("y", None)], inits)
        if run:
            c.input_pb(0, np.arange(4, dtype=np.float32))
            c.save(m, "error", contains=["reshape_wrap"], cmd="run {model} --input {dir}/input_0.pb", note="the wrapped Reshape lets Slice read row 2**62")
        else:
            c.save(m, "error", contains=["reshape_wrap"], note="the wrapped Reshape lets Slice read row 2**62")
    write.__name__ = "wrap_reshape_then_slice" + ("_run" if run else "")
    return write


case(_reshape_slice(False))
case(_reshape_slice(True))


@case
def wrap_expand(root):
    c = Case(root, "wrap_expand")
    m = model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_huge")], [vi("x", [1])], [vi("y", None)], [i64("shape", [2**32, 2**32])])
    c.save(m, "error", contains=["expand_huge"], note="2**64 elements wrap to 0")


@case
def wrap_expand_bytes(root):
    c = Case(root, "wrap_expand_bytes")
    m = model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_bytes")], [vi("x", [1])], [vi("y", None)], [i64("shape", [2**31, 2**31])])
    c.save(m, "error", contains=["expand_bytes"], note="2**62 f32 elements: 2**64 bytes wrap to 0")


@case
def wrap_tile(root):
    c = Case(root, "wrap_tile")
    m = model([helper.make_node("Tile", ["x", "reps"], ["y"], name="tile_huge")], [vi("x", [4])], [vi("y", None)], [i64("reps", [2**62])])
    c.save(m, "error", contains=["tile_huge"], note="4 * 2**62 wraps to 0")


@case
def wrap_tile_run(root):
    c = Case(root, "wrap_tile_run")
    m = model([helper.make_node("Tile", ["x", "reps"], ["y"], name="tile_huge")], [vi("x", [4])], [vi("y", None)], [i64("reps", [2**62])])
    c.input_pb(0, np.ones(4, dtype=np.float32))
    c.save(m, "error", contains=["tile_huge"], cmd="run {model} --input {dir}/input_0.pb")


@case
def wrap_tile_negative(root):
    c = Case(root, "wrap_tile_negative")
    m = model([helper.make_node("Tile", ["x", "reps"], ["y"], name="tile_neg")], [vi("x", [4])], [vi("y", None)], [i64("reps", [-1])])
    c.save(m, "error", contains=["tile_neg"])


@case
def wrap_pad(root):
    c = Case(root, "wrap_pad")
    m = model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_huge", mode="constant")], [vi("x", [4])], [vi("y", None)], [i64("pads", [2**62, 2**62])])
    c.save(m, "error", contains=["pad_huge"], note="4 + 2**63 overflows i64")


@case
def wrap_pad_negative(root):
    c = Case(root, "wrap_pad_negative")
    m = model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_neg", mode="constant")], [vi("x", [4])], [vi("y", None)], [i64("pads", [-3, -3])])
    c.save(m, "error", contains=["pad_neg"], note="crops more than the tensor holds")


@case
def wrap_pad_reflect_too_wide(root):
    c = Case(root, "wrap_pad_reflect_too_wide")
    m = model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_reflect", mode="reflect")], [vi("x", [4])], [vi("y", None)], [i64("pads", [100, 0])])
    c.input_pb(0, np.arange(4, dtype=np.float32))
    # onnxruntime refuses pads wider than the axis; ONNX's reference (np.pad) reflects
    # periodically, and so does burnc: a defined result, not a hostile one.
    c.save(m, "compiles", cmd="run {model} --input {dir}/input_0.pb", stdout_contains=["[104]"], note="reflect pads wider than the axis: reflected periodically, as ONNX's reference does")


@case
def wrap_resize(root):
    c = Case(root, "wrap_resize")
    m = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize_huge", mode="nearest")], [vi("x", [1, 1, 2, 2])], [vi("y", None)],
              [f32("scales", [1, 1, 1e30, 1e30])])
    c.save(m, "error", contains=["resize_huge"])


@case
def wrap_resize_sizes(root):
    c = Case(root, "wrap_resize_sizes")
    m = model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize_sizes", mode="nearest")], [vi("x", [1, 1, 2, 2])], [vi("y", None)],
              [i64("sizes", [1, 1, 2**32, 2**32])])
    c.save(m, "error", contains=["resize_sizes"])


@case
def wrap_resize_nan(root):
    c = Case(root, "wrap_resize_nan")
    m = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize_nan", mode="nearest")], [vi("x", [1, 1, 2, 2])], [vi("y", None)],
              [f32("scales", [1, 1, float("nan"), float("inf")])])
    c.save(m, "error", contains=["resize_nan"])


@case
def wrap_range(root):
    c = Case(root, "wrap_range")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_huge")], [], [vi("y", None, I64)],
              [i64("start", 0), i64("limit", 2**62), i64("delta", 1)])
    c.save(m, "error", contains=["range_huge"])


@case
def wrap_range_full_span(root):
    c = Case(root, "wrap_range_full_span")
    # limit - start overflows i64.
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_span")], [], [vi("y", ["n"], I64)],
              [i64("start", -(2**63)), i64("limit", 2**63 - 1), i64("delta", 2**62)])
    c.save(m, "compiles", note="limit - start overflows i64, but the range has 4 elements")


@case
def wrap_range_float(root):
    c = Case(root, "wrap_range_float")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_float")], [], [vi("y", None)],
              [f32("start", 0), f32("limit", 1e30), f32("delta", 1)])
    c.save(m, "error", contains=["range_float"])


@case
def wrap_range_zero_delta(root):
    c = Case(root, "wrap_range_zero_delta")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_zero")], [], [vi("y", None, I64)],
              [i64("start", 0), i64("limit", 10), i64("delta", 0)])
    c.save(m, "error", contains=["range_zero"])


@case
def wrap_range_run(root):
    c = Case(root, "wrap_range_run")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_huge")], [], [vi("y", None, I64)],
              [i64("start", 0), i64("limit", 2**62), i64("delta", 1)])
    c.save(m, "error", contains=["range_huge"], cmd="run {model}")


@case
def wrap_onehot(root):
    c = Case(root, "wrap_onehot")
    m = model([helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], name="onehot_huge")], [vi("idx", [2], I64)], [vi("y", None)],
              [i64("depth", 10**12), f32("values", [0, 1])])
    c.save(m, "error", contains=["onehot_huge"], note="[2, 1e12] f32: 8 TB")


@case
def wrap_input_dims(root):
    c = Case(root, "wrap_input_dims")
    m = model([helper.make_node("Relu", ["big_input"], ["y"], name="r")], [vi("big_input", [10**12, 10**12])], [vi("y", [10**12, 10**12])])
    c.save(m, "error", contains=["big_input"], note="1e24 elements")


@case
def wrap_input_dims_exact(root):
    c = Case(root, "wrap_input_dims_exact")
    m = model([helper.make_node("Relu", ["big_input"], ["y"], name="r")], [vi("big_input", [2**32, 2**32])], [vi("y", None)])
    c.save(m, "error", contains=["big_input"], note="2**64 elements wrap to 0")


@case
def wrap_input_dims_negative(root):
    c = Case(root, "wrap_input_dims_negative")
    m = model([helper.make_node("Relu", ["neg_input"], ["y"], name="r")], [vi("neg_input", [-2, -2])], [vi("y", None)])
    c.save(m, "error", contains=["neg_input"])


@case
def wrap_loop_scan(root):
    c = Case(root, "wrap_loop_scan")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Identity", ["x"], ["scan_out"], name="body_scan")],
        "body", [vi("iter", [], I64), vi("cond_in", [], TensorProto.BOOL)], [vi("cond_out", [], TensorProto.BOOL), vi("scan_out", [2**24])])
    node = helper.make_node("Loop", ["trip", ""], ["stacked"], name="loop_huge", body=body)
    m = model([node], [vi("x", [2**24])], [vi("stacked", None)], [i64("trip", 2**40)])
    c.save(m, "error", contains=["loop_huge"], note="2**40 iterations of a [2**24] scan output: 2**64 elements wrap to 0")


@case
def wrap_concat(root):
    c = Case(root, "wrap_concat")
    n = 2**63 - 1
    m = model([helper.make_node("Concat", ["h0", "h1", "h2"], ["y"], name="concat_huge", axis=0)],
              [vi(f"h{i}", [n], TensorProto.UINT8) for i in range(3)], [vi("y", None, TensorProto.UINT8)])
    c.save(m, "error", note="three [2**63 - 1] u8 inputs: each is huge, their Concat wraps u64")


@case
def wrap_concat_i64(root):
    c = Case(root, "wrap_concat_i64")
    m = model([helper.make_node("Concat", ["h0", "h1"], ["y"], name="concat_i64", axis=0)],
              [vi(f"h{i}", [2**62], TensorProto.UINT8) for i in range(2)], [vi("y", None, TensorProto.UINT8)])
    c.save(m, "error", note="two [2**62] u8 inputs: Concat's dim is 2**63, past i64")


@case
def wrap_matmul_dims(root):
    c = Case(root, "wrap_matmul_dims")
    m = model([helper.make_node("MatMul", ["a_in", "b_in"], ["y"], name="matmul_huge")], [vi("a_in", [2**32, 1]), vi("b_in", [1, 2**32])], [vi("y", None)])
    c.save(m, "error", note="[2**32, 2**32] output: 2**64 elements wrap to 0")


@case
def wrap_gather_index(root):
    c = Case(root, "wrap_gather_index")
    m = model([helper.make_node("Gather", ["x", "idx"], ["y"], name="gather_far", axis=0)], [vi("x", [4])], [vi("y", None)], [i64("idx", [2**62])])
    c.save(m, "error", contains=["gather_far"], note="constant index far out of range")


# ---------------------------------------------------------------------------------------------
# Checks only `run` makes today: node attributes, graph structure, versions.

def _transpose(name, perm, dims=(2, 3)):
    def write(root):
        c = Case(root, name)
        m = model([helper.make_node("Transpose", ["x"], ["y"], name="tr_bad", perm=perm)], [vi("x", list(dims))], [vi("y", None)])
        c.save(m, "error", contains=["tr_bad", "Transpose"])
    write.__name__ = name
    return write


case(_transpose("attr_transpose_perm_repeat", [0, 0]))
case(_transpose("attr_transpose_perm_range", [0, 5]))
case(_transpose("attr_transpose_perm_negative", [0, -1]))
case(_transpose("attr_transpose_perm_length", [0]))
case(_transpose("attr_transpose_perm_huge", [0, 2**62]))


def _conv(name, group, w_dims, x_dims=(1, 4, 5, 5)):
    def write(root):
        c = Case(root, name)
        rng = np.random.default_rng(0)
        w = numpy_helper.from_array(rng.standard_normal(w_dims).astype(np.float32), "w")
        m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="k_bad", group=group)], [vi("x", list(x_dims))], [vi("y", None)], [w])
        c.save(m, "error", contains=["k_bad", "Conv"])
    write.__name__ = name
    return write


case(_conv("attr_conv_group_zero", 0, (4, 4, 3, 3)))
case(_conv("attr_conv_group_negative", -2, (4, 2, 3, 3)))
case(_conv("attr_conv_group_not_dividing", 3, (6, 1, 3, 3)))
case(_conv("attr_conv_group_out_channels", 2, (3, 2, 3, 3)))
case(_conv("attr_conv_weight_channels", 1, (4, 3, 3, 3)))


@case
def attr_conv_stride_zero(root):
    c = Case(root, "attr_conv_stride_zero")
    w = numpy_helper.from_array(np.ones((2, 4, 3, 3), dtype=np.float32), "w")
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="k_stride0", strides=[0, 0])], [vi("x", [1, 4, 5, 5])], [vi("y", None)], [w])
    c.save(m, "error", contains=["k_stride0", "Conv"])


@case
def attr_conv_kernel_too_big(root):
    c = Case(root, "attr_conv_kernel_too_big")
    w = numpy_helper.from_array(np.ones((2, 4, 9, 9), dtype=np.float32), "w")
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="k_big")], [vi("x", [1, 4, 5, 5])], [vi("y", None)], [w])
    c.save(m, "error", contains=["k_big", "Conv"], note="kernel wider than the padded input")


@case
def attr_maxpool_dilation_huge(root):
    c = Case(root, "attr_maxpool_dilation_huge")
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="pool_dil", kernel_shape=[2, 2], dilations=[2**62, 2**62])],
              [vi("x", [1, 1, 5, 5])], [vi("y", None)])
    c.save(m, "error", contains=["pool_dil", "MaxPool"], note="(k - 1) * dilation overflows")


@case
def attr_transpose_perm_floats(root):
    c = Case(root, "attr_transpose_perm_floats")
    m = model([helper.make_node("Transpose", ["x"], ["y"], name="tr_float", perm=[1.0, 0.0])], [vi("x", [2, 3])], [vi("y", None)])
    c.save(m, "error", contains=["tr_float", "Transpose", "perm"])


@case
def attr_gemm_alpha_string(root):
    c = Case(root, "attr_gemm_alpha_string")
    m = model([helper.make_node("Gemm", ["a_in", "b_in"], ["y"], name="g_str", alpha="1.0")], [vi("a_in", [2, 3]), vi("b_in", [3, 2])], [vi("y", None)])
    c.save(m, "error", contains=["g_str", "Gemm", "alpha"])


@case
def attr_concat_axis_tensor(root):
    c = Case(root, "attr_concat_axis_tensor")
    m = model([helper.make_node("Concat", ["a_in", "b_in"], ["y"], name="cat_tensor_axis", axis=i64("axis", 0))],
              [vi("a_in", [2]), vi("b_in", [2])], [vi("y", None)])
    c.save(m, "error", contains=["cat_tensor_axis", "Concat", "axis"])


@case
def attr_cast_to_string(root):
    c = Case(root, "attr_cast_to_string")
    m = model([helper.make_node("Cast", ["x"], ["y"], name="c_str", to="FLOAT")], [vi("x", [4])], [vi("y", None)])
    c.save(m, "error", contains=["c_str", "Cast"])


@case
def attr_cast_to_bogus(root):
    c = Case(root, "attr_cast_to_bogus")
    m = model([helper.make_node("Cast", ["x"], ["y"], name="c_bogus", to=12345)], [vi("x", [4])], [vi("y", None)])
    c.save(m, "error", contains=["c_bogus", "Cast"])


@case
def attr_concat_missing_axis(root):
    c = Case(root, "attr_concat_missing_axis")
    m = model([helper.make_node("Concat", ["a_in", "b_in"], ["y"], name="cat_no_axis")], [vi("a_in", [2]), vi("b_in", [2])], [vi("y", None)])
    c.save(m, "error", contains=["cat_no_axis", "Concat", "axis"])


@case
def attr_concat_axis_range(root):
    c = Case(root, "attr_concat_axis_range")
    m = model([helper.make_node("Concat", ["a_in", "b_in"], ["y"], name="cat_axis5", axis=5)], [vi("a_in", [2]), vi("b_in", [2])], [vi("y", None)])
    c.save(m, "error", contains=["cat_axis5", "Concat"])


@case
def attr_cast_missing_to(root):
    c = Case(root, "attr_cast_missing_to")
    m = model([helper.make_node("Cast", ["x"], ["y"], name="c_no_to")], [vi("x", [4])], [vi("y", None)])
    c.save(m, "error", contains=["c_no_to", "Cast"])


@case
def attr_softmax_axis_range(root):
    c = Case(root, "attr_softmax_axis_range")
    m = model([helper.make_node("Softmax", ["x"], ["y"], name="sm_axis", axis=7)], [vi("x", [2, 3])], [vi("y", None)])
    c.save(m, "error", contains=["sm_axis", "Softmax"])


@case
def attr_duplicate(root):
    c = Case(root, "attr_duplicate")
    node = helper.make_node("Transpose", ["x"], ["y"], name="tr_dup", perm=[1, 0])
    node.attribute.append(helper.make_attribute("perm", [0, 1]))
    c.save(model([node], [vi("x", [2, 3])], [vi("y", None)]), "error", contains=["tr_dup", "perm"], note="one attribute given twice")


def _version_case(name, opset=OPSET, ir=IR, contains=()):
    def write(root):
        c = Case(root, name)
        c.save(relu_model(opset=opset, ir=ir), "error", contains=list(contains))
    write.__name__ = name
    return write


case(_version_case("version_opset_0", opset=0, contains=["opset"]))
case(_version_case("version_opset_999", opset=999, contains=["999"]))
case(_version_case("version_opset_negative", opset=-1, contains=["opset"]))
case(_version_case("version_ir_99", ir=99, contains=["99"]))
case(_version_case("version_ir_0", ir=0))


@case
def version_no_opset_import(root):
    c = Case(root, "version_no_opset_import")
    m = relu_model()
    del m.opset_import[:]
    c.save(m, "error", contains=["opset"])


@case
def graph_two_producers(root):
    c = Case(root, "graph_two_producers")
    nodes = [helper.make_node("Relu", ["x"], ["dup_value"], name="prod_a"), helper.make_node("Neg", ["x"], ["dup_value"], name="prod_b")]
    c.save(model(nodes, [vi("x", [4])], [vi("dup_value", [4])]), "error", contains=["dup_value"])


@case
def graph_node_writes_input(root):
    c = Case(root, "graph_node_writes_input")
    nodes = [helper.make_node("Relu", ["x"], ["clobbered"], name="writer"), helper.make_node("Add", ["clobbered", "x"], ["y"], name="add")]
    c.save(model(nodes, [vi("x", [4]), vi("clobbered", [4])], [vi("y", [4])]), "error", contains=["clobbered"])


@case
def graph_two_inputs_one_name(root):
    c = Case(root, "graph_two_inputs_one_name")
    m = model([helper.make_node("Add", ["twin", "twin"], ["y"], name="add")], [vi("twin", [4]), vi("twin", [4])], [vi("y", [4])])
    c.save(m, "error", contains=["twin"])


@case
def graph_two_initializers_one_name(root):
    c = Case(root, "graph_two_initializers_one_name")
    m = model([helper.make_node("Add", ["x", "twin_w"], ["y"], name="add")], [vi("x", [4])], [vi("y", [4])],
              [f32("twin_w", [1, 2, 3, 4]), f32("twin_w", [5, 6, 7, 8])])
    c.save(m, "error", contains=["twin_w"])


@case
def graph_initializer_and_output(root):
    c = Case(root, "graph_initializer_and_output")
    nodes = [helper.make_node("Relu", ["x"], ["shadowed"], name="shadow_writer"), helper.make_node("Add", ["shadowed", "x"], ["y"], name="add")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4])], [f32("shadowed", [1, 2, 3, 4])]), "error", contains=["shadowed"])


@case
def graph_cycle(root):
    c = Case(root, "graph_cycle")
    nodes = [helper.make_node("Add", ["x", "cyc_b_out"], ["cyc_a_out"], name="cyc_a"), helper.make_node("Relu", ["cyc_a_out"], ["cyc_b_out"], name="cyc_b")]
    c.save(model(nodes, [vi("x", [4])], [vi("cyc_b_out", [4])]), "error", contains=["cyc_"])


@case
def graph_self_loop(root):
    c = Case(root, "graph_self_loop")
    nodes = [helper.make_node("Add", ["x", "selfref"], ["selfref"], name="selfref_node")]
    c.save(model(nodes, [vi("x", [4])], [vi("selfref", [4])]), "error", contains=["selfref"])


@case
def graph_undefined_value(root):
    c = Case(root, "graph_undefined_value")
    nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="reader")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4])]), "error", contains=["nowhere"], note="regression: already an error")


@case
def graph_undefined_output(root):
    c = Case(root, "graph_undefined_output")
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4]), vi("never_made", [4])]), "error", contains=["never_made"])


@case
def graph_output_twice(root):
    c = Case(root, "graph_output_twice")
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4]), vi("y", [4])]), "compiles", note="one value listed twice as a graph output")


@case
def graph_too_many_inputs(root):
    c = Case(root, "graph_too_many_inputs")
    nodes = [helper.make_node("Relu", ["x", "x", "x"], ["y"], name="r_3in")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4])]), "error", contains=["r_3in", "Relu"])


@case
def graph_too_few_inputs(root):
    c = Case(root, "graph_too_few_inputs")
    nodes = [helper.make_node("Add", ["x"], ["y"], name="a_1in")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4])]), "error", contains=["a_1in", "Add"])


@case
def graph_no_outputs_node(root):
    c = Case(root, "graph_no_outputs_node")
    nodes = [helper.make_node("Relu", ["x"], [], name="relu_0out"), helper.make_node("Neg", ["x"], ["y"], name="n")]
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4])]), "error", contains=["relu_0out"])


@case
def graph_input_shape_mismatch(root):
    c = Case(root, "graph_input_shape_mismatch")
    nodes = [helper.make_node("Add", ["p", "q"], ["y"], name="a_mismatch")]
    c.save(model(nodes, [vi("p", [3]), vi("q", [4])], [vi("y", None)]), "error", contains=["a_mismatch", "Add"], note="shapes [3] and [4] do not broadcast")


@case
def graph_initializer_bad_size(root):
    c = Case(root, "graph_initializer_bad_size")
    w = f32("short_w", [1, 2])
    w.dims[:] = [4]  # raw data holds 2 floats, dims claim 4
    m = model([helper.make_node("Add", ["x", "short_w"], ["y"], name="add")], [vi("x", [4])], [vi("y", [4])], [w])
    c.save(m, "error", contains=["short_w"])


@case
def graph_initializer_huge_dims(root):
    c = Case(root, "graph_initializer_huge_dims")
    w = f32("huge_w", [])
    w.ClearField("raw_data")
    w.dims[:] = [2**32, 2**32]  # 2**64 elements wrap to 0: "matches" the empty data
    m = model([helper.make_node("Add", ["x", "huge_w"], ["y"], name="add")], [vi("x", [4])], [vi("y", None)], [w])
    c.save(m, "error", contains=["huge_w"])


@case
def graph_initializer_negative_dims(root):
    c = Case(root, "graph_initializer_negative_dims")
    w = f32("neg_w", [1, 2, 3, 4])
    w.dims[:] = [-2, -2]
    m = model([helper.make_node("Add", ["x", "neg_w"], ["y"], name="add")], [vi("x", [4])], [vi("y", None)], [w])
    c.save(m, "error", contains=["neg_w"])


# ---------------------------------------------------------------------------------------------
# Smaller ones.

@case
def range_near_limit_run(root):
    c = Case(root, "range_near_limit_run")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_edge")], [], [vi("y", ["n"], I64)],
              [i64("start", 2**63 - 10), i64("limit", 2**63 - 1), i64("delta", 2)])
    # start, start+2, .., start+8 = 2**63 - 2: five elements; the next step would pass i64::MAX.
    c.save(m, "compiles", cmd="run {model}", stdout_contains=["[5]"])


@case
def range_near_limit(root):
    c = Case(root, "range_near_limit")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_edge")], [], [vi("y", ["n"], I64)],
              [i64("start", 2**63 - 10), i64("limit", 2**63 - 1), i64("delta", 2)])
    c.save(m, "compiles")


@case
def range_near_min_run(root):
    c = Case(root, "range_near_min_run")
    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_edge_neg")], [], [vi("y", ["n"], I64)],
              [i64("start", -(2**63) + 9), i64("limit", -(2**63)), i64("delta", -2)])
    c.save(m, "compiles", cmd="run {model}", stdout_contains=["[5]"])


def _external(c, tensor_name, location, offset=None, length=None, n=4):
    t = f32(tensor_name, np.arange(n))
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location}
    if offset is not None:
        entries["offset"] = str(offset)
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = t.external_data.add()
        e.key = k
        e.value = v
    return model([helper.make_node("Add", ["x", tensor_name], ["y"], name="add_ext")], [vi("x", [n])], [vi("y", [n])], [t])


@case
def ext_valid(root):
    c = Case(root, "ext_valid")
    with open(os.path.join(c.dir, "weights.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    c.save(_external(c, "ext_w", "weights.bin"), "compiles", note="control: well-formed external data")


@case
def ext_fifo(root):
    c = Case(root, "ext_fifo")
    os.mkfifo(os.path.join(c.dir, "weights.fifo"))
    c.save(_external(c, "fifo_w", "weights.fifo"), "error", contains=["fifo_w"], timeout=20, note="opening a FIFO for reading blocks until a writer comes")


@case
def ext_parent_escape(root):
    c = Case(root, "ext_parent_escape")
    c.save(_external(c, "escape_w", "../../etc/passwd"), "error", contains=["escape_w"])


@case
def ext_deep_parent_escape(root):
    c = Case(root, "ext_deep_parent_escape")
    c.save(_external(c, "escape_w", "../" * 40 + "etc/passwd"), "error", contains=["escape_w"])


@case
def ext_absolute(root):
    c = Case(root, "ext_absolute")
    c.save(_external(c, "abs_w", "/etc/passwd"), "error", contains=["abs_w"])


@case
def ext_dev_zero(root):
    c = Case(root, "ext_dev_zero")
    c.save(_external(c, "zero_w", "/dev/zero", length=2**62), "error", contains=["zero_w"], timeout=20, max_memory_mb=256)


@case
def ext_symlink_escape(root):
    c = Case(root, "ext_symlink_escape")
    os.symlink("/etc/passwd", os.path.join(c.dir, "weights.bin"))
    c.save(_external(c, "link_w", "weights.bin"), "error", contains=["link_w"], note="a symlink in the model folder that points outside it")


@case
def ext_directory(root):
    c = Case(root, "ext_directory")
    os.mkdir(os.path.join(c.dir, "weights_dir"))
    c.save(_external(c, "dir_w", "weights_dir"), "error", contains=["dir_w"])


@case
def ext_missing(root):
    c = Case(root, "ext_missing")
    c.save(_external(c, "missing_w", "no_such_file.bin"), "error", contains=["missing_w"])


@case
def ext_offset_past_end(root):
    c = Case(root, "ext_offset_past_end")
    with open(os.path.join(c.dir, "weights.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    c.save(_external(c, "far_w", "weights.bin", offset=2**63 - 8, length=16), "error", contains=["far_w"], note="offset + length overflows i64")


@case
def ext_length_short(root):
    c = Case(root, "ext_length_short")
    with open(os.path.join(c.dir, "weights.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    c.save(_external(c, "short_w", "weights.bin", length=8), "error", contains=["short_w"], note="length 8 bytes for a [4] f32 tensor")


@case
def ext_negative_offset(root):
    c = Case(root, "ext_negative_offset")
    with open(os.path.join(c.dir, "weights.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    c.save(_external(c, "neg_w", "weights.bin", offset=-16), "error", contains=["neg_w"])


@case
def ext_location_newline(root):
    c = Case(root, "ext_location_newline")
    loc = "w\nfn INJECTED() {}\n.bin"
    with open(os.path.join(c.dir, loc), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    c.save(_external(c, "nl_w", loc), "compiles", note="the location is a legal file name; it must not leak into code")


def _input_model():
    return relu_model()


@case
def run_input_dev_zero(root):
    c = Case(root, "run_input_dev_zero")
    c.save(_input_model(), "error", cmd="run {model} --input /dev/zero", timeout=20, max_memory_mb=256)


@case
def run_input_dev_zero_pb(root):
    c = Case(root, "run_input_dev_zero_pb")
    os.symlink("/dev/zero", os.path.join(c.dir, "zero.pb"))
    c.save(_input_model(), "error", cmd="run {model} --input {dir}/zero.pb", timeout=20, max_memory_mb=256, note="a .pb that never ends")


@case
def run_input_dev_zero_npy(root):
    c = Case(root, "run_input_dev_zero_npy")
    os.symlink("/dev/zero", os.path.join(c.dir, "zero.npy"))
    c.save(_input_model(), "error", cmd="run {model} --input {dir}/zero.npy", timeout=20, max_memory_mb=256)


@case
def run_input_npy_huge_header(root):
    c = Case(root, "run_input_npy_huge_header")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(os.path.join(c.dir, "input.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 16)
    c.save(_input_model(), "error", cmd="run {model} --input {dir}/input.npy", timeout=20, max_memory_mb=256, note="npy shape 2**64 elements wraps to 0")


@case
def run_input_pb_huge_dims(root):
    c = Case(root, "run_input_pb_huge_dims")
    t = f32("x", [])
    t.ClearField("raw_data")
    t.dims[:] = [2**32, 2**32]
    with open(os.path.join(c.dir, "input_0.pb"), "wb") as f:
        f.write(t.SerializeToString())
    c.save(_input_model(), "error", cmd="run {model} --input {dir}/input_0.pb", timeout=20, max_memory_mb=256, note="pb dims 2**64 elements wrap to 0")


@case
def ctrl_unsupported_op(root):
    c = Case(root, "ctrl_unsupported_op")
    m = model([helper.make_node("NoSuchOp", ["x"], ["y"], name="bad\x1b[31mnode\x07")], [vi("x", [4])], [vi("y", [4])])
    c.save(m, "error", contains=["NoSuchOp", "bad"], no_control=True)


@case
def ctrl_op_type(root):
    c = Case(root, "ctrl_op_type")
    m = model([helper.make_node("No\x1b[2JSuch\rOp", ["x"], ["y"], name="ctrl_op_node")], [vi("x", [4])], [vi("y", [4])])
    c.save(m, "error", contains=["ctrl_op_node"], no_control=True)


@case
def ctrl_undefined_value(root):
    c = Case(root, "ctrl_undefined_value")
    m = model([helper.make_node("Add", ["x", "gone\x1b[2J\r"], ["y"], name="ctrl_reader")], [vi("x", [4])], [vi("y", [4])])
    c.save(m, "error", contains=["gone"], no_control=True)


@case
def ctrl_newline_in_error(root):
    c = Case(root, "ctrl_newline_in_error")
    m = model([helper.make_node("NoSuchOp", ["x"], ["y"], name="line1\nline2\n")], [vi("x", [4])], [vi("y", [4])])
    c.save(m, "error", contains=["NoSuchOp", "line1"], no_control=True, note="a newline in the node name must not split the error line")


@case
def ctrl_domain(root):
    c = Case(root, "ctrl_domain")
    node = helper.make_node("Relu", ["x"], ["y"], name="dom_node", domain="evil\x1b]0;title\x07.domain")
    m = model([node], [vi("x", [4])], [vi("y", [4])])
    m.opset_import.append(helper.make_opsetid("evil\x1b]0;title\x07.domain", 1))
    c.save(m, "error", contains=["dom_node"], no_control=True, note="unknown domain with an OSC escape")


@case
def nested_if_outer_value(root):
    c = Case(root, "nested_if_outer_value")
    inner_then = helper.make_graph([helper.make_node("Identity", ["r"], ["it"], name="inner_then_id")], "inner_then", [], [vi("it", [2])])
    inner_else = helper.make_graph([helper.make_node("Neg", ["r"], ["ie"], name="inner_else_neg")], "inner_else", [], [vi("ie", [2])])
    outer_then = helper.make_graph([helper.make_node("If", ["c"], ["ot"], name="inner_if", then_branch=inner_then, else_branch=inner_else)],
                                   "outer_then", [], [vi("ot", [2])])
    outer_else = helper.make_graph([helper.make_node("Abs", ["r"], ["oe"], name="outer_else_abs")], "outer_else", [], [vi("oe", [2])])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("If", ["c"], ["y"], name="outer_if", then_branch=outer_then, else_branch=outer_else)]
    m = model(nodes, [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    c.save(m, "compiles", note="the inner branches read `r` from two levels up")


@case
def nested_if_outer_value_run(root):
    c = Case(root, "nested_if_outer_value_run")
    inner_then = helper.make_graph([helper.make_node("Identity", ["r"], ["it"], name="inner_then_id")], "inner_then", [], [vi("it", [2])])
    inner_else = helper.make_graph([helper.make_node("Neg", ["r"], ["ie"], name="inner_else_neg")], "inner_else", [], [vi("ie", [2])])
    outer_then = helper.make_graph([helper.make_node("If", ["c"], ["ot"], name="inner_if", then_branch=inner_then, else_branch=inner_else)],
                                   "outer_then", [], [vi("ot", [2])])
    outer_else = helper.make_graph([helper.make_node("Abs", ["r"], ["oe"], name="outer_else_abs")], "outer_else", [], [vi("oe", [2])])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("If", ["c"], ["y"], name="outer_if", then_branch=outer_then, else_branch=outer_else)]
    m = model(nodes, [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    c.input_pb(0, np.array(True))
    c.input_pb(1, np.array([-1.5, 2.5], dtype=np.float32))
    c.save(m, "compiles", cmd="run {model} --input {dir}/input_0.pb --input {dir}/input_1.pb", stdout_contains=["[2]"])


@case
def subgraph_shadowing(root):
    c = Case(root, "subgraph_shadowing")
    # The then-branch defines its own `outer_val`, shadowing the outer one: ONNX requires names
    # to be unique across nested scopes (SSA), so this is an error.
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["outer_val"], name="shadow_node")], "then", [], [vi("outer_val", [2])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"], name="else_abs")], "else", [], [vi("e", [2])])
    nodes = [helper.make_node("Relu", ["x"], ["outer_val"], name="relu"),
             helper.make_node("If", ["c"], ["y"], name="if_shadow", then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["outer_val", "y"], ["z"], name="add")]
    m = model(nodes, [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("z", [2])])
    c.save(m, "error", contains=["outer_val"], note="a subgraph redefining an outer value breaks SSA")


@case
def if_missing_branch(root):
    c = Case(root, "if_missing_branch")
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="then_neg")], "then", [], [vi("t", [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branchless", then_branch=then_g)]
    m = model(nodes, [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    c.save(m, "error", contains=["branchless", "If"])


@case
def chain_1000(root):
    c = Case(root, "chain_1000")
    ops = ["Relu", "Neg", "Abs"]
    nodes = []
    prev = "x"
    for i in range(1000):
        out = "y" if i == 999 else f"t{i}"
        nodes.append(helper.make_node(ops[i % 3], [prev], [out], name=f"n{i}"))
        prev = out
    c.save(model(nodes, [vi("x", [4])], [vi("y", [4])]), "compiles", note="size smoke test")


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _nested_ifs(depth):
    """Serialized model: `depth` Ifs, each in the previous one's then-branch. Encoded by hand: the
    Python protobuf runtime refuses to build messages nested deeper than 100."""
    leaf = helper.make_graph([helper.make_node("Relu", ["x"], ["leaf"], name="leaf")], "leaf", [], [vi("leaf", [2])])
    graph_bytes = leaf.SerializeToString()
    node_bytes = None
    out = "leaf"
    for d in range(depth):
        els = helper.make_graph([helper.make_node("Neg", ["x"], [f"e{d}"], name=f"else{d}")], f"else{d}", [], [vi(f"e{d}", [2])])
        node = helper.make_node("If", ["c"], [f"o{d}"], name=f"if{d}", else_branch=els)
        then_attr = onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH)
        # NodeProto.attribute = 5, AttributeProto.g = 6, GraphProto.node = 1.
        node_bytes = node.SerializeToString() + _field(5, then_attr.SerializeToString() + _field(6, graph_bytes))
        out = f"o{d}"
        graph_bytes = _field(1, node_bytes) + helper.make_graph([], f"then{d}", [], [vi(out, [2])]).SerializeToString()
    m = model([], [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi(out, [2])])
    # A second ModelProto.graph (7) field holding only GraphProto.node (1): protobuf merges it
    # into the first.
    return m.SerializeToString() + _field(7, _field(1, node_bytes))


@case
def deep_nested_if(root):
    c = Case(root, "deep_nested_if")
    # 25 levels (3 protobuf messages each: node, attribute, graph) stay under the usual decoder
    # recursion limit of 100.
    c.save(_nested_ifs(25), "compiles", note="nested Ifs: recursion in the frontend, passes and codegen")


@case
def deep_nested_if_2000(root):
    c = Case(root, "deep_nested_if_2000")
    c.save(_nested_ifs(2000), "error", note="6000 nested protobuf messages: a clean error, not a stack overflow")


@case
def deep_nested_if_text_limit(root):
    c = Case(root, "deep_nested_if_text_limit")
    c.save(_nested_ifs(31), "compiles", note="31 levels: 96 nested messages, just under a limit of 100")


# ---------------------------------------------------------------------------------------------
# String tensors and images: text that reaches the module as literals, patterns whose automaton
# explodes, lookups that do not add up, text that is not UTF-8, an image header that lies.

S = TensorProto.STRING


def _strings(name, values):
    t = TensorProto(name=name, data_type=S, dims=[len(values)])
    t.string_data.extend(v if isinstance(v, bytes) else v.encode() for v in values)
    return t


@case
def inj_string_constant(root):
    c = Case(root, "inj_string_constant")
    payload = ['"); } INJECTED(); fn f() { ("', "\\\"\n INJECTED()", "*/ INJECTED() /*", "\x7f\x00 INJECTED"]
    m = model([helper.make_node("Equal", ["text", "probe"], ["same"], name="eq")], [vi("text", [4], S)], [vi("same", [4], TensorProto.BOOL)],
              [_strings("probe", payload)], opset=21, ir=10)
    c.save(m, "compiles", note="string constants are written as escaped literals")


@case
def inj_label_encoder_strings(root):
    c = Case(root, "inj_label_encoder_strings")
    node = helper.make_node("LabelEncoder", ["x"], ["y"], name="enc", domain="ai.onnx.ml", keys_int64s=[1, 2],
                            values_strings=['"); INJECTED(); ("', "x\ny INJECTED"], default_string="*/ INJECTED /*")
    m = model([node], [vi("x", [3], I64)], [vi("y", [3], S)], opset=21, ir=10)
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 4))
    c.save(m, "compiles", note="LabelEncoder's values become literals")


@case
def regex_dfa_explodes(root):
    c = Case(root, "regex_dfa_explodes")
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], name="grep_bomb", pattern="[ab]*a[ab]{40}")
    m = model([node], [vi("x", [2], S)], [vi("y", [2], TensorProto.BOOL)], opset=21, ir=10)
    c.save(m, "error", contains=["grep_bomb", "pattern"], timeout=60, max_memory_mb=1024, note="a DFA of 2^40 states: refused at the size limit")


@case
def inj_regex_pattern(root):
    c = Case(root, "inj_regex_pattern")
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], name="grep", pattern="x*/\nINJECTED();\n/*")
    m = model([node], [vi("x", [2], S)], [vi("y", [2], TensorProto.BOOL)], opset=21, ir=10)
    c.save(m, "compiles", note="the pattern reaches the module only in an escaped comment")


@case
def regex_bad_syntax(root):
    c = Case(root, "regex_bad_syntax")
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], name="grep_bad", pattern="(unclosed")
    m = model([node], [vi("x", [2], S)], [vi("y", [2], TensorProto.BOOL)], opset=21, ir=10)
    c.save(m, "error", contains=["grep_bad", "pattern"])


@case
def label_encoder_counts_differ(root):
    c = Case(root, "label_encoder_counts_differ")
    node = helper.make_node("LabelEncoder", ["x"], ["y"], name="enc_short", domain="ai.onnx.ml", keys_strings=["a", "b", "c"], values_int64s=[1, 2])
    m = model([node], [vi("x", [3], S)], [vi("y", [3], I64)], opset=21, ir=10)
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 2))
    c.save(m, "error", contains=["enc_short", "3 keys but 2 values"])


@case
def string_not_utf8(root):
    c = Case(root, "string_not_utf8")
    m = model([helper.make_node("Equal", ["text", "probe"], ["same"], name="eq")], [vi("text", [2], S)], [vi("same", [2], TensorProto.BOOL)],
              [_strings("probe", [b"ok", b"\xff\xfe"])], opset=21, ir=10)
    c.save(m, "error", contains=["probe", "UTF-8"])


def _png_header_only(width, height):
    import struct, zlib
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


@case
def image_header_lies(root):
    c = Case(root, "image_header_lies")
    png = np.frombuffer(_png_header_only(200000, 200000), dtype=np.uint8)
    m = model([helper.make_node("ImageDecoder", ["img"], ["pixels"], name="decode_bomb")], [], [vi("pixels", None, TensorProto.UINT8)],
              [numpy_helper.from_array(png.copy(), "img")], opset=21, ir=10)
    c.save(m, "error", contains=["decode_bomb"], max_memory_mb=1024, note="a PNG claiming 200000x200000 pixels (120 GB): refused by the decoder's limits")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_hostile_models.py OUT_DIR")
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    # Cases from an earlier run (folders with an expect.txt) go, so renamed cases leave nothing.
    for entry in os.listdir(root):
        d = os.path.join(root, entry)
        if os.path.isdir(d) and not os.path.islink(d) and os.path.isfile(os.path.join(d, "expect.txt")):
            shutil.rmtree(d)
    for fn in CASES:
        fn(root)
    print(f"wrote {len(CASES)} cases to {root}")


if __name__ == "__main__":
    main()
