"""One tensor-parallel transformer block step (forward, no grad, a decode-sized batch) under
torch's own tensor-parallel API (parallelize_module, ColwiseParallel / RowwiseParallel over a
DeviceMesh) on a torch.distributed backend: tpcomm (import tpcomm.torch) or gloo. Each step makes
two all-reduces of tokens x d float32. Run by bench/python_overhead.sh under the .venv's torch.

    torchrun --nproc_per_node 2 bench/tp_block_step.py tpcomm|gloo
"""

import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

D, HEADS, TOKENS, WARMUP, STEPS = 512, 8, 8, 30, 300


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.up, self.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        b, n, _ = x.shape
        y = self.norm1(x)
        q, k, v = (p(y).view(b, n, -1, D // HEADS).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, n, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def main():
    backend = sys.argv[1]
    if backend == "tpcomm":
        import tpcomm.torch  # noqa: F401  registers the backend
    dist.init_process_group(backend)
    w = dist.get_world_size()
    torch.manual_seed(0)
    block = Block()
    parallelize_module(block, init_device_mesh("cpu", (w,)), {
        "q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
        "o": RowwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()})
    x = torch.randn(1, TOKENS, D)
    times = []
    with torch.no_grad():
        for i in range(WARMUP + STEPS):
            dist.barrier()
            start = time.perf_counter()
            block(x)
            if i >= WARMUP:
                times.append((time.perf_counter() - start) * 1e6)
    if dist.get_rank() == 0:
        print(f"TP block step, torch {torch.__version__}, backend {backend:6}, W = {w}, d = {D}, "
              f"{TOKENS} tokens: min {min(times):8.1f} us, median {statistics.median(times):8.1f} "
              f"us ({STEPS} steps)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
