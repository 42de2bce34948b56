"""The extension module shares nothing by symbol with the rest of the process: it exports only
PyInit__tpcomm (python/module.map), and after `import torch, tpcomm` and a collective call the
process maps one file each of libcrypto, libfmt and libgloo, the copies torch's libraries load
too (docs/python.md); libmpi is not mapped at all, since no group asked for MPI (the MPI bootstrap
opens its plug-in on demand: docs/packaging.md)."""

import subprocess

from conftest import BUILD, engine_setup, run_ranks

# The libraries tpcomm and Debian's torch both link: one copy each may be mapped.
SHARED_WITH_TORCH = ("libcrypto.so", "libfmt.so", "libgloo.so")


def module_path():
    found = sorted((BUILD / "python" / "tpcomm").glob("_tpcomm*.so"))
    assert len(found) == 1, f"expected one _tpcomm*.so under {BUILD / 'python' / 'tpcomm'}: {found}"
    return found[0]


def test_the_module_exports_only_its_init_symbol():
    nm = subprocess.run(
        ["nm", "-D", "--defined-only", str(module_path())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    assert nm.returncode == 0, nm.stdout
    names = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    print(f"{module_path().name} exports {len(names)} dynamic symbol(s)")
    assert names == {"PyInit__tpcomm"}, f"{len(names)} exported: {sorted(names)}"


def test_torch_and_tpcomm_map_one_copy_of_each_shared_library(tmp_path):
    # Two ranks on the Gloo engine, so that Gloo's code runs in the process beside torch's.
    env, n, args = engine_setup("gloo")
    run = run_ranks(
        tmp_path,
        f"""
        comm = tpcomm.Communicator.from_env(timeout=20)
        assert comm.route("all_reduce", 4000)[0] == "gloo", comm.route("all_reduce", 4000)
        t = torch.arange(1000, dtype=torch.float32) * (comm.rank + 1)
        comm.all_reduce(t)
        want = torch.arange(1000, dtype=torch.float32) * sum(range(1, comm.size + 1))
        assert torch.equal(t, want), t
        files = {{}}
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 6:
                    continue
                path = fields[5].strip()
                base = os.path.basename(path)
                for lib in {SHARED_WITH_TORCH!r}:
                    if base.startswith(lib):
                        files.setdefault(lib, set()).add(os.path.realpath(path))
                if base.startswith("libmpi.so"):
                    files.setdefault("libmpi.so", set()).add(os.path.realpath(path))
        found = "; ".join(f"{{k}}: {{sorted(v)}}" for k, v in sorted(files.items()))
        print(f"rank {{RANK}} maps: {{found}}", flush=True)
        for lib in {SHARED_WITH_TORCH!r}:
            assert len(files.get(lib, ())) == 1, (lib, files.get(lib))
        assert "libmpi.so" not in files, ("libmpi mapped without MPI", files["libmpi.so"])
        ok("one copy each, no libmpi")
    """,
        n=n,
        env=env,
        args=args,
    )
    print(run.output)
    run.expect_ok(n)
