"""A mixture-of-experts token dispatch, as an engine makes it through torch.distributed: the
int64 count exchange, then all_to_all_single of the tokens with uneven splits, for 16, 256 and
4096 tokens per rank of hidden 4096 in bfloat16, each token sent to 2 of 8 experts spread evenly
over the ranks (a seeded router, seed 0: the split tpcomm bench --op all_to_all --uneven uses).
It times the same calls on a group of backend tpcomm and on a gloo group of the same ranks, in
one run, and prints the median of 5 rounds per size and backend (each round: the median of
its timed calls). Run under the .venv's torch:

    torchrun --nproc_per_node 2 bench/moe_all_to_all.py
"""

import statistics
import time

import torch
import torch.distributed as dist

import tpcomm.torch  # noqa: F401 (registers the backend)

HIDDEN, EXPERTS, CHOSEN, ROUNDS = 4096, 8, 2, 5
TOKENS = (16, 256, 4096)


def router_splits(tokens, world, rank):
    """Rows rank `rank` sends to each rank: the same generator as tpcomm bench's
    (tools/bench/bench_exchange.cpp), so both benches move the same blocks."""
    state = 0
    rows = [[0] * world for _ in range(world)]
    for s in range(world):
        for _ in range(tokens):
            picks = []
            for bound in (EXPERTS, EXPERTS - 1):
                state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
                picks.append((state >> 33) % bound)
            first, second = picks
            if second >= first:
                second += 1
            for e in (first, second):
                rows[s][e * world // EXPERTS] += 1
    return rows[rank], [rows[s][rank] for s in range(world)]


def time_dispatch(group, x, y, sends, takes, counts, got_counts):
    def once():
        dist.all_to_all_single(got_counts, counts, group=group)
        dist.all_to_all_single(y, x, takes, sends, group=group)

    for _ in range(3):
        once()
    # About 0.2 s of calls, as many on every rank: rank 0's count.
    calls = torch.tensor([max(5, int(0.2 / max(1e-5, _probe(once, group))))])
    dist.broadcast(calls, 0, group=group)
    calls = int(calls)
    times = []
    for _ in range(calls):
        dist.barrier(group=group)
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _probe(fn, group):
    dist.barrier(group=group)
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    dist.init_process_group("tpcomm")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    results = {}
    for tokens in TOKENS:
        sends, takes = router_splits(tokens, world, rank)
        x = torch.randn(sum(sends), HIDDEN).to(torch.bfloat16)
        y = torch.empty(sum(takes), HIDDEN, dtype=torch.bfloat16)
        counts = torch.tensor(sends, dtype=torch.int64)
        got = torch.empty(world, dtype=torch.int64)
        for name, group in (("tpcomm", dist.group.WORLD), ("gloo", gloo)):
            rounds = [time_dispatch(group, x, y, sends, takes, counts, got) for _ in range(ROUNDS)]
            results[(tokens, name)] = statistics.median(rounds)
            want = torch.tensor(takes, dtype=torch.int64)
            assert torch.equal(got, want), (name, got, want)
    if rank == 0:
        print(
            f"# MoE dispatch (counts + all_to_all_single), W = {world}, hidden {HIDDEN} bf16, "
            f"2 of 8 experts, median of {ROUNDS} rounds"
        )
        print(f"# {'tokens':>7} {'tpcomm (us)':>12} {'gloo (us)':>12} {'tpcomm/gloo':>12}")
        for tokens in TOKENS:
            t, g = results[(tokens, "tpcomm")] * 1e6, results[(tokens, "gloo")] * 1e6
            print(f"  {tokens:>7} {t:>12.1f} {g:>12.1f} {t / g:>12.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
