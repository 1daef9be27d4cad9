"""adcuda.distributed, DistributedDataParallel, DistributedSampler and the launcher.

The multi-process tests start 2 ranks with ``mpiexec`` (MPICH from PyPI in CI) and read what each
rank wrote; they skip where mpi4py or a working ``mpiexec`` is missing, unless ADCUDA_REQUIRE_MPI is
set (CI sets it, so that they cannot silently skip there).
"""

import json
import math
import os
import subprocess
import sys
import time

import pytest

import adcuda
import adcuda.distributed as dist
from adcuda.utils.data.distributed import DistributedSampler

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_scripts")
RUN_LIMIT_S = 120  # no run here comes near it; it only keeps a broken MPI from hanging the suite


# ---------------------------------------------------------------------------------------------- helpers
def _child_env():
    """The ranks import the same adcuda as this test process."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(adcuda.__file__)))
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": package_root + (os.pathsep + path if path else ""),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


def _unavailable(reason):
    if os.environ.get("ADCUDA_REQUIRE_MPI"):
        pytest.fail(f"ADCUDA_REQUIRE_MPI is set but MPI is not usable: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def mpiexec():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        _unavailable("mpi4py is not installed (pip install 'adcuda[distributed]')")
    from adcuda.distributed.launch import find_mpiexec

    try:
        path = find_mpiexec()
    except SystemExit as e:
        _unavailable(str(e))
    probe = subprocess.run(
        [path, "-n", "2", sys.executable, "-c", "from mpi4py import MPI; assert MPI.COMM_WORLD.Get_size() == 2"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_child_env(),
    )
    if probe.returncode != 0:
        _unavailable(f"{path} -n 2 does not start an MPI world of 2: {probe.stdout[-500:]!r} {probe.stderr[-500:]!r}")
    return path


def _run(command):
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=_child_env())
    return proc, time.monotonic() - start


def _read_ranks(out_dir, world=2):
    return [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(world)]


# ---------------------------------------------------------------------------------------------- DistributedSampler
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_partitions_exactly(shuffle, drop_last):
    for n in range(0, 14):
        for replicas in range(1, 6):
            shares = [
                list(DistributedSampler(range(n), replicas, r, shuffle=shuffle, seed=3, drop_last=drop_last))
                for r in range(replicas)
            ]
            per_rank = n // replicas if drop_last else math.ceil(n / replicas)
            assert all(len(s) == per_rank for s in shares), (n, replicas, shares)
            assert all(len(s) == len(DistributedSampler(range(n), replicas, 0, drop_last=drop_last)) for s in shares)
            flat = [i for s in shares for i in s]
            assert all(0 <= i < n for i in flat)
            if drop_last:
                assert len(set(flat)) == len(flat) == per_rank * replicas  # disjoint, only the tail dropped
            else:
                assert set(flat) == set(range(n))  # every sample is seen
                assert len(flat) - len(set(flat)) == per_rank * replicas - n  # padding repeats only what it must


def test_sampler_epochs_reshuffle_the_same_way_on_every_rank():
    def shares(epoch, seed=0):
        samplers = [DistributedSampler(range(20), 2, r, seed=seed) for r in range(2)]
        for s in samplers:
            s.set_epoch(epoch)
        return [list(s) for s in samplers]

    first = shares(0)
    assert shares(0) == first  # deterministic for (seed, epoch)
    assert shares(1) != first and sorted(sum(shares(1), [])) == list(range(20))
    assert shares(0, seed=1) != first
    assert list(DistributedSampler(range(20), 2, 0, shuffle=False)) == list(range(0, 20, 2))


def test_sampler_matches_torch_distributed_sampler():
    torch_sampler = pytest.importorskip("torch.utils.data.distributed").DistributedSampler
    for n in (1, 5, 10, 11, 17):
        for replicas in (1, 2, 3, 4, 7):
            for drop_last in (False, True):
                for rank in range(replicas):
                    ours = list(DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last))
                    theirs = list(torch_sampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last))
                    assert ours == theirs, (n, replicas, rank, drop_last)


def test_sampler_feeds_a_dataloader():
    from adcuda.utils.data import DataLoader, TensorDataset

    data = TensorDataset(adcuda.arange(10.0))
    loader = DataLoader(data, batch_size=2, sampler=DistributedSampler(data, num_replicas=2, rank=1, shuffle=False))
    assert [batch[0].tolist() for batch in loader] == [[1.0, 3.0], [5.0, 7.0], [9.0]]


def test_sampler_argument_errors():
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


# ---------------------------------------------------------------------------------------------- without a group
def test_calls_without_a_process_group_say_so():
    assert not dist.is_initialized()
    with pytest.raises(dist.DistributedError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(dist.DistributedError, match="init_process_group"):
        dist.all_reduce(adcuda.ones(2))
    with pytest.raises(dist.DistributedError, match="init_process_group"):
        adcuda.nn.parallel.DistributedDataParallel(adcuda.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")


@pytest.mark.skipif(adcuda.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_nccl_without_cuda_is_a_clear_device_error():
    message = r"init_process_group\('nccl'\): CUDA is not usable here .*backend='mpi'"
    with pytest.raises(adcuda.DeviceError, match=message):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()
    assert not dist.is_nccl_available()


@pytest.mark.cuda
def test_nccl_world_of_one_on_a_gpu():
    if not dist.is_nccl_available():
        pytest.skip("needs a usable CUDA device and CuPy's NCCL bindings")
    proc, _ = _run([sys.executable, os.path.join(SCRIPTS, "nccl_world1.py")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "NCCL backend collectives on CuPy arrays: ok" in proc.stdout


# ---------------------------------------------------------------------------------------------- 2 ranks over MPI
@pytest.fixture(scope="module")
def scenarios(mpiexec, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("ddp"))
    proc, _ = _run([mpiexec, "-n", "2", sys.executable, os.path.join(SCRIPTS, "ddp_scenarios.py"), out_dir])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = _read_ranks(out_dir)
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world_size"] == 2 for r in ranks)
    return [r["results"] for r in ranks]


@pytest.mark.parametrize("name", ["train", "train_small_buckets", "no_sync", "unused"])
def test_ddp_on_half_batches_equals_one_process_on_the_whole_batch(scenarios, name):
    for rank in scenarios:
        assert rank[name]["to_reference"] < 1e-5
        assert rank[name]["across_ranks"] == 0.0


def test_no_sync_keeps_gradients_local_until_the_synced_backward(scenarios):
    for rank in scenarios:
        assert rank["no_sync"]["local_grad_difference_under_no_sync"] > 1e-3


def test_unused_parameters(scenarios):
    for rank in scenarios:
        assert rank["unused"]["spare_grad_is_none"] is True
        message = rank["unused_without_flag"]
        assert "'spare.weight', 'spare.bias' got none" in message and "find_unused_parameters=True" in message


def test_float16_parameters_with_master_weights(scenarios):
    for rank in scenarios:
        result = rank["half_master_weights"]
        assert result["dtype"] == "adcuda.float16"
        assert result["across_ranks"] == 0.0
        assert result["to_reference"] < 5e-3


def test_an_overflow_on_one_rank_is_seen_by_every_rank(scenarios):
    for rank in scenarios:
        assert rank["overflow"] == {"grads_finite": False, "found_inf_agreed": True}


def test_grad_scaler_skips_the_same_steps_on_every_rank(scenarios):
    for rank in scenarios:
        assert rank["grad_scaler"]["stepped"] == [True, False, True, True]  # rank 1 alone overflowed at step 1
        assert rank["grad_scaler"]["scales"] == [1024.0, 512.0, 512.0, 512.0]
        assert rank["grad_scaler"]["across_ranks"] == 0.0


def test_mismatched_parameter_shapes_are_caught_at_wrap_time(scenarios):
    for rank in scenarios:
        message = rank["mismatched_shapes"]
        assert "parameter 0 is '0.weight' of shape (3, 4) (float32) on rank 0" in message
        assert "'0.weight' of shape (4, 4) (float32) on rank 1" in message


def test_collectives(scenarios):
    for result in (rank["collectives"] for rank in scenarios):
        assert result["sum"] == [[3.0] * 3] * 2
        assert result["avg"] == [[1.5] * 3] * 2
        assert result["max"] == [3, 0] and result["min"] == [2, -1] and result["product"] == [6, 0]
        assert result["non_contiguous"] == [[0.0, 3.0, 6.0], [9.0, 12.0, 15.0]]
        assert result["float16"] == [[1.5, 4.5], "adcuda.float16"]
        assert result["bool_any"] == [True, False]
        assert result["async_wait"] is True
        assert result["broadcast"] == [1.0, 1.0, 1.0]
        assert result["all_gather"] == [[0, 0], [1, 10]]
        assert result["all_gather_object"] == [{"rank": 0}, {"rank": 1}]
        assert "ReduceOp.AVG needs a floating point tensor, got adcuda.int64" in result["avg_int_error"]


def test_a_rank_that_stops_answering_is_named_within_the_timeout(mpiexec):
    proc, elapsed = _run([mpiexec, "-n", "2", sys.executable, os.path.join(SCRIPTS, "failures.py"), "stop"])
    assert proc.returncode != 0
    assert "barrier: rank 1 did not answer within 2 s (it may have died" in proc.stderr, proc.stderr[-3000:]
    assert elapsed < 2 + 10  # the timeout, the liveness probe and MPI's start-up and clean-up


def test_a_killed_rank_ends_the_job_instead_of_hanging(mpiexec):
    proc, elapsed = _run([mpiexec, "-n", "2", sys.executable, os.path.join(SCRIPTS, "failures.py"), "kill"])
    assert proc.returncode != 0
    assert elapsed < 60  # the survivor's collective timeout in failures.py; it ends far sooner
    assert "Killed" in proc.stdout + proc.stderr or "signal 9" in proc.stdout + proc.stderr


def test_launcher_places_ranks_and_passes_arguments(mpiexec, tmp_path):
    proc, _ = _run(
        [
            sys.executable,
            "-m",
            "adcuda.distributed.launch",
            "--nproc-per-node",
            "2",
            "--mpiexec",
            mpiexec,
            os.path.join(SCRIPTS, "failures.py"),
            "placement",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, seen in enumerate(_read_ranks(str(tmp_path))):
        assert seen["env"] == {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2"}
        assert seen["argv"] == [os.path.join(SCRIPTS, "failures.py"), "placement", str(tmp_path)]
        assert seen["name"] == "__main__"


@pytest.mark.parametrize("launcher", ["launch", "mpiexec"])
def test_a_rank_that_raises_ends_the_job_at_once(mpiexec, launcher):
    script = [os.path.join(SCRIPTS, "failures.py"), "raise"]
    if launcher == "launch":
        command = [sys.executable, "-m", "adcuda.distributed.launch", "--nproc-per-node", "2", "--mpiexec", mpiexec]
    else:
        command = [mpiexec, "-n", "2", sys.executable]
    proc, elapsed = _run(command + script)
    assert proc.returncode != 0
    assert "RuntimeError: rank 1 failed on purpose" in proc.stderr
    assert elapsed < 30  # rank 0 waits in a barrier with a 60 s timeout: only the abort ends it this soon


def test_launcher_without_mpiexec_says_how_to_get_one(tmp_path):
    from adcuda.distributed.launch import find_mpiexec

    with pytest.raises(SystemExit, match="is not an executable file"):
        find_mpiexec(str(tmp_path / "no-such-mpiexec"))
