#!/usr/bin/env python3
"""On the GPU machine: the ceilings burnc's kernels are measured against (docs/CUDA.md): dense
matrix-multiply rate in bf16 and f32 (TF32 off) at 8192³, and device-memory bandwidth (a
4 GiB copy), each the median of CUDA-event-timed runs, with PyTorch's kernels.

    python3 scripts/gpu_ceilings.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import event_median_ms  # noqa: E402


def median_ms(fn):
    return event_median_ms(fn, iters=30, warmup=5)


torch.backends.cuda.matmul.allow_tf32 = False
n = 8192
for dt in [torch.bfloat16, torch.float32]:
    a, b = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
    ms = median_ms(lambda: a @ b)
    print(f"ceiling: matmul {dt} {n}^3: {2 * n**3 / ms / 1e9:.0f} TFLOP/s ({ms:.3f} ms)")
x = torch.empty(1 << 30, device="cuda", dtype=torch.float32)
y = torch.empty_like(x)
ms = median_ms(lambda: y.copy_(x))
print(f"ceiling: copy 4 GiB: {2 * x.numel() * 4 / ms / 1e6:.0f} GB/s read+write ({ms:.3f} ms)")
