"""A tensor-parallel decoder layer's MLP half on tpcomm: the tp_mlp example grown by the residual
stream and an RMSNorm, which follow the row-parallel all-reduce in one fused call
(all_reduce_rmsnorm), checked against the same layer in one process and, on torch 2.4 or later,
compiled with torch.compile(fullgraph=True) against eager.

    h = rmsnorm(residual + all_reduce(mlp_shard(x)), weight)     (and the new residual)

    PYTHONPATH=build/python build/bin/tpcomm run -n 2 -- .venv/bin/python examples/python/tp_decoder_layer.py
    PYTHONPATH=build/python build/bin/tpcomm run -n 4 -- /usr/bin/python3 examples/python/tp_decoder_layer.py

(torch 1.13, Debian's: the eager layer only, through Communicator.all_reduce_rmsnorm.)
"""

import sys

import torch

import tpcomm

TOKENS, HIDDEN, FFN, EPS = 16, 256, 1024, 1e-6


class TPDecoderMLP(torch.nn.Module):
    """Column-parallel up projection, ReLU, row-parallel down projection, then the fused
    all-reduce + residual add + RMSNorm. forward(x, residual) -> (normed, new residual)."""

    def __init__(self, w1_shard, w2_shard, norm_weight, comm, compiled_ops):
        super().__init__()
        self.w1, self.w2, self.norm_weight = w1_shard, w2_shard, norm_weight
        self.comm = comm
        # A compiled graph holds the communicator's registered name (tpcomm.torch.ops).
        self.ops = compiled_ops
        self.name = compiled_ops.name_of(comm) if compiled_ops else None

    def forward(self, x, residual):
        partial = torch.relu(x @ self.w1) @ self.w2
        if self.ops is None:  # torch without custom-op fakes: the Communicator's call
            return self.comm.all_reduce_rmsnorm(partial, residual, self.norm_weight, EPS)
        return self.ops.all_reduce_rmsnorm(partial, residual, self.norm_weight, EPS, self.name)


def reference(x, residual, w1, w2, weight):
    """The whole layer in one process, in float64."""
    d = torch.float64
    s = residual.to(d) + torch.relu(x.to(d) @ w1.to(d)) @ w2.to(d)
    return s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * weight.to(d), s


def compiled_ops():
    try:
        from tpcomm.torch import ops
    except ImportError:  # torch 1.13: no torch.library.register_fake
        return None
    return ops


def main():
    comm = tpcomm.Communicator.from_env(timeout=60)
    rank, size = comm.rank, comm.size
    torch.manual_seed(2026)  # every rank builds the same full weights and inputs
    x = torch.randn(TOKENS, HIDDEN)
    residual = torch.randn(TOKENS, HIDDEN)
    w1 = torch.randn(HIDDEN, FFN) / HIDDEN**0.5
    w2 = torch.randn(FFN, HIDDEN) / FFN**0.5
    weight = torch.rand(HIDDEN) + 0.5
    cols = slice(rank * FFN // size, (rank + 1) * FFN // size)
    ops = compiled_ops()
    layer = TPDecoderMLP(w1[:, cols].contiguous(), w2[cols, :].contiguous(), weight, comm, ops)

    with torch.no_grad():
        out, new_residual = layer(x, residual)
        want, want_residual = reference(x, residual, w1, w2, weight)
        error = max((out - want).abs().max().item(), (new_residual - want_residual).abs().max())
        good = error < 1e-4
        compiled = "not compiled (torch without register_fake)"
        if ops is not None:
            fast = torch.compile(layer, fullgraph=True, backend="aot_eager")
            c_out, c_residual = fast(x, residual)
            same = torch.equal(c_out, out) and torch.equal(c_residual, new_residual)
            compiled = f"torch.compile(fullgraph=True) {'equal to' if same else 'DIFFERS from'} eager"
            good = good and same
    backend, algorithm = comm.route("all_reduce_rmsnorm", out.numel() * 4, torch.float32)
    verdict = "correct" if good else "WRONG"
    # The error itself depends on the CPU's matmul kernels; the verdict does not.
    detail = "max error below 1e-4" if error < 1e-4 else f"max error {float(error):.1e}"
    print(
        f"tp_decoder_layer rank {rank} of {size}: fused all_reduce_rmsnorm via "
        f"{backend}/{algorithm} against one process: {detail}; {compiled}: {verdict}\n",
        end="",
        flush=True,
    )
    comm.close()
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
