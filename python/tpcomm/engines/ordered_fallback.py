"""Deterministic mode on an engine's own path: where tpcomm's plan leaves a floating reduction to
the engine (a size its plan gives to NCCL or Gloo, which the engine runs itself), every rank's
input is gathered by the engine's all_gather, whose result does not depend on its algorithm (a
gather moves bytes), and summed here in rank order 0..W-1, accumulated in float32 and rounded
once: the bits tpcomm's own backends give in the mode (docs/communicator.md, "Deterministic
mode"), so a call's result does not depend on which side its size falls."""

import torch

# The dtypes tpcomm's mode promises rank order for (16-bit ones accumulated in float32).
ORDERED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def rank_order_sum(gathered):
    """The sum over dimension 0 of `gathered` (W, ...), in order, in float32, rounded once to its
    dtype. Elementwise additions: no reduction kernel reorders them."""
    acc = gathered[0].to(torch.float32, copy=True)
    for r in range(1, gathered.shape[0]):
        acc += gathered[r]  # widened to float32 first: exact
    return acc.to(gathered.dtype)


def ordered_all_reduce(all_gather, input_):
    """all_gather(tensor, dim) is the engine's; the result has input_'s shape and dtype."""
    gathered = all_gather(input_.contiguous().reshape(1, -1), 0)
    return rank_order_sum(gathered).reshape(input_.shape)


def ordered_reduce_scatter(all_gather, input_, dim, rank, world):
    """This rank's part of the rank-order sum, `dim` split in rank order into `world` parts."""
    whole = ordered_all_reduce(all_gather, input_)
    return whole.chunk(world, dim=dim)[rank].contiguous()
