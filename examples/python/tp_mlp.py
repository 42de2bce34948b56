"""A tensor-parallel 2-layer MLP on tpcomm, checked against the same MLP in one process.

Tensor parallel (Megatron-style): the first layer is split by columns, the second by rows, and
one all_reduce after the second layer sums the ranks' partial outputs. Sequence parallel: the
tokens are split across ranks; all_gather collects them before the first layer and
reduce_scatter leaves each rank its own tokens' outputs.

    PYTHONPATH=build/python torchrun --redirects 2 --tee 2 --nproc_per_node 2 examples/python/tp_mlp.py
    PYTHONPATH=build/python build/bin/tpcomm run -n 4 -- /usr/bin/python3 examples/python/tp_mlp.py

(--redirects 2 --tee 2: Debian's torchrun on Python 3.11 needs them, docs/python.md.)
"""

import sys

import torch

import tpcomm

TOKENS, HIDDEN, FFN = 64, 256, 1024


def mlp(x, w1, w2):
    return torch.relu(x @ w1) @ w2


def main():
    comm = tpcomm.Communicator.from_env(timeout=60)
    rank, size = comm.rank, comm.size
    # Every rank builds the same full weights and input (same seed); each keeps its shard.
    torch.manual_seed(2026)
    x = torch.randn(TOKENS, HIDDEN)
    w1 = torch.randn(HIDDEN, FFN) / HIDDEN ** 0.5
    w2 = torch.randn(FFN, HIDDEN) / FFN ** 0.5
    reference = mlp(x, w1, w2)

    cols = slice(rank * FFN // size, (rank + 1) * FFN // size)
    w1_shard, w2_shard = w1[:, cols].contiguous(), w2[cols, :].contiguous()

    # Tensor parallel: the full input on every rank, one all_reduce of the partial outputs.
    y = mlp(x, w1_shard, w2_shard)
    comm.all_reduce(y)
    tp_error = (y - reference).abs().max().item()

    # Sequence parallel: each rank holds TOKENS / size tokens.
    rows = slice(rank * TOKENS // size, (rank + 1) * TOKENS // size)
    x_full = comm.all_gather(x[rows].contiguous())
    assert torch.equal(x_full, x), "all_gather reassembles the sequence exactly"
    y_mine = comm.reduce_scatter(mlp(x_full, w1_shard, w2_shard))
    sp_error = (y_mine - reference[rows]).abs().max().item()

    # fp32 sums in another order than one process's matmul: agreement to rounding.
    tolerance = 1e-4
    good = tp_error < tolerance and sp_error < tolerance
    backend, algorithm = comm.route("all_reduce", y.numel() * 4, torch.float32)
    # The errors themselves depend on the CPU's matmul kernels; the verdict does not.
    detail = (f"max error below {tolerance:g}" if good else
              f"max error {tp_error:.1e} (tensor-parallel), {sp_error:.1e} (sequence-parallel)")
    # One write with its newline: ranks share the terminal, and under torchrun (unbuffered
    # output) print's separate write of the newline let another rank's line in between.
    print(f"tp_mlp rank {rank} of {size}: tensor- and sequence-parallel outputs vs one process: "
          f"{detail} (all_reduce via {backend}/{algorithm}): {'correct' if good else 'WRONG'}\n",
          end="", flush=True)
    comm.close()
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
