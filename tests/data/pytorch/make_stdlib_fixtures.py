"""Writes extra PyTorch checkpoint fixtures with the standard library only (no torch).

A fake `torch` / `torch._utils` is put in sys.modules so that pickle names the same globals torch
does, and the archive is laid out as torch.save lays it out. These cover what the torch-made
fixtures (make_fixtures.py) do not: pickle protocol 4 (FRAME, STACK_GLOBAL, MEMOIZE,
SHORT_BINUNICODE), `_rebuild_parameter`, an unknown class with BUILD state, a plain dict with
lists, and a big-endian file. Run: `python3 make_stdlib_fixtures.py OUTDIR`.
"""
import pickle
import struct
import sys
import types
import zipfile
from collections import OrderedDict

torch = types.ModuleType("torch")
utils = types.ModuleType("torch._utils")
mylib = types.ModuleType("mylib")
sys.modules.update({"torch": torch, "torch._utils": utils, "mylib": mylib})
torch._utils = utils


def _global(module, name, obj):
    obj.__module__, obj.__qualname__, obj.__name__ = module.__name__, name, name
    setattr(module, name, obj)
    return obj


for st in ["FloatStorage", "DoubleStorage", "IntStorage"]:
    _global(torch, st, type(st, (), {}))
for fn in ["_rebuild_tensor_v2", "_rebuild_parameter"]:
    _global(utils, fn, lambda *a: None)


class Opt:  # an optimizer-like object burnc must skip
    def __init__(self):
        self.lr = 0.1
        self.state = {"momentum": [1.0, 2.0]}


_global(mylib, "Opt", Opt)


class Storage:
    def __init__(self, key, cls, fmt, values):
        self.key, self.cls, self.fmt, self.values = key, cls, fmt, values

    def data(self):
        return struct.pack(f"{self.fmt}{len(self.values)}{self.cls.code}", *self.values)


class Tensor:
    def __init__(self, storage, offset, size, stride, parameter=False):
        self.args = (storage, offset, tuple(size), tuple(stride), False, OrderedDict())
        self.parameter = parameter

    def __reduce_ex__(self, protocol):
        if self.parameter:
            inner = Tensor(*self.args[:4])
            return (utils._rebuild_parameter, (inner, True, OrderedDict()))
        return (utils._rebuild_tensor_v2, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", len(obj.values))
        return None


torch.FloatStorage.code = "f"
torch.DoubleStorage.code = "d"
torch.IntStorage.code = "i"


def save(path, obj, storages, protocol, byteorder="little"):
    import io

    buf = io.BytesIO()
    Pickler(buf, protocol=protocol).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", byteorder)
        for s in storages:
            z.writestr(f"archive/data/{s.key}", s.data())
        z.writestr("archive/version", "3\n")


out = sys.argv[1] if len(sys.argv) > 1 else "."

# Protocol 4: {"model": {w: Parameter f32 [2, 3] = 0..5, b: f64 [2] = [0.5, -1.5]}, ...}.
w = Storage("0", torch.FloatStorage, "<", [float(i) for i in range(6)])
b = Storage("1", torch.DoubleStorage, "<", [0.5, -1.5])
ckpt = {
    "model": OrderedDict(w=Tensor(w, 0, [2, 3], [3, 1], parameter=True), b=Tensor(b, 0, [2], [1])),
    "step": 10,
    "names": ["a", "b"],
    "opt": Opt(),
}
save(f"{out}/protocol4.pt", ckpt, [w, b], protocol=4)

# Big-endian: {"w": i32 [3] = [1, -2, 300]}, byteorder "big".
s = Storage("0", torch.IntStorage, ">", [1, -2, 300])
save(f"{out}/big_endian.pt", OrderedDict(w=Tensor(s, 0, [3], [1])), [s], protocol=2, byteorder="big")
