"""The launchers: mpirun and srun (its environment) for from_env; and tpcomm beside
torch.distributed: from_torch (the ranks meet through torch's store), and
from_env under torchrun with its default static rendezvous and with --standalone, before and
after init_process_group (torchrun's store holds MASTER_PORT; tpcomm's takes MASTER_PORT + 2)."""

from conftest import free_port, run_ranks

FROM_TORCH = """
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TEST_TORCH_PORT']}",
                            rank=RANK, world_size=int(os.environ["WORLD_SIZE"]))
    comm = tpcomm.Communicator.from_torch(timeout=30)
    assert (comm.rank, comm.size) == (dist.get_rank(), dist.get_world_size())
    t = torch.arange(1000, dtype=torch.float32) * (RANK + 1)
    ref = t.clone()
    dist.all_reduce(ref)
    comm.all_reduce(t)
    assert torch.equal(t, ref), "tpcomm and torch.distributed agree"
    # A sub-group: torch's new_group is called by every rank, from_torch by its members only.
    g = dist.new_group([1, 2])
    if RANK in (1, 2):
        sub = tpcomm.Communicator.from_torch(group=g, timeout=30)
        assert (sub.rank, sub.size) == (RANK - 1, 2)
        x = torch.full((10,), float(RANK))
        sub.all_reduce(x)
        assert torch.equal(x, torch.full((10,), 3.0))
    # A second communicator of the same group gets its own store and key.
    again = tpcomm.Communicator.from_torch(timeout=30)
    again.barrier()
    dist.barrier()
    # Nothing left behind in torch's store once every rank has joined.
    store = dist.distributed_c10d._get_default_store()
    import datetime
    try:
        store.wait(["tpcomm/from_torch/0,1,2/0"], datetime.timedelta(milliseconds=200))
        raise SystemExit("the address key stayed in torch's store")
    except RuntimeError:
        pass
    ok()
"""


def test_from_torch_meets_through_torchs_store_for_the_world_and_a_sub_group(tmp_path):
    run_ranks(tmp_path, FROM_TORCH, n=3, env={"TEST_TORCH_PORT": str(free_port())}).expect_ok(3)


def test_from_torch_before_init_process_group_says_so(tmp_path):
    run_ranks(
        tmp_path,
        """
        try:
            tpcomm.Communicator.from_torch()
        except ValueError as e:
            assert "init_process_group" in str(e), str(e)
            ok()
    """,
        n=1,
    ).expect_ok(1)


TORCHRUN_BODY = """
    import torch.distributed as dist
    if os.environ.get("TEST_TORCH_FIRST"):
        dist.init_process_group("gloo")   # torch's store on MASTER_PORT first
    comm = tpcomm.Communicator.from_env(timeout=30)
    t = torch.full((4096,), float(comm.rank + 1))
    comm.all_reduce(t)
    assert torch.equal(t, torch.full((4096,), 3.0)), t[:4]
    if os.environ.get("TEST_TORCH_FIRST"):
        ref = torch.full((8,), float(comm.rank))
        dist.all_reduce(ref)
        assert torch.equal(ref, torch.full((8,), 1.0))
        viaTorch = tpcomm.Communicator.from_torch(timeout=30)
        viaTorch.barrier()
    ok(os.environ["MASTER_PORT"])
"""


def test_torchrun_default_rendezvous_from_env(tmp_path):
    run_ranks(tmp_path, TORCHRUN_BODY, launcher="torchrun").expect_ok(2)


def test_torchrun_default_rendezvous_after_init_process_group(tmp_path):
    run_ranks(
        tmp_path, TORCHRUN_BODY, launcher="torchrun", env={"TEST_TORCH_FIRST": "1"}
    ).expect_ok(2)


def test_torchrun_standalone_after_init_process_group(tmp_path):
    run_ranks(
        tmp_path,
        TORCHRUN_BODY,
        launcher="torchrun",
        args=("--standalone",),
        env={"TEST_TORCH_FIRST": "1"},
    ).expect_ok(2)


def test_a_foreign_server_on_tpcomms_port_is_named_not_unreachable(tmp_path):
    # Under torchrun, TPCOMM_STORE_PORT pointed at torchrun's own store: the error says what
    # is there.
    run = run_ranks(
        tmp_path,
        """
        try:
            tpcomm.Communicator.from_env(timeout=10)
        except tpcomm.Error as e:
            assert "is not a tpcomm store" in str(e) and "unreachable" not in str(e), str(e)
            ok()
    """,
        launcher="torchrun",
        env={"TPCOMM_STORE_PORT": "MASTER"},
    )
    run.expect_ok(2)


LAUNCHED = """
    comm = tpcomm.Communicator.from_env(timeout=30)
    assert comm.rank == RANK and comm.size == 2
    t = torch.full((300,), float(comm.rank + 1))
    comm.all_reduce(t)
    assert torch.equal(t, torch.full((300,), 3.0))
    ok()
"""


def test_mpirun_from_env(tmp_path):
    run_ranks(tmp_path, LAUNCHED, launcher="mpirun").expect_ok(2)


def test_srun_environment_from_env(tmp_path):
    run_ranks(tmp_path, LAUNCHED, launcher="srun").expect_ok(2)
