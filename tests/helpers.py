"""Helpers more than one test file uses (the fixtures they share are in conftest.py; those that need
adcuda.nn or adcuda.train are in training_helpers.py: spawned DataLoader workers import this module,
and those imports would slow every worker's start)."""

import contextlib
import importlib.util
import signal
import subprocess
import sys

import numpy as np
import pytest

import adcuda

# the devices a test runs on: the CPU always, CUDA where a usable GPU (or the emulator) is there
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
        ],
    ),
]


def load_module(name, path):
    """The Python file at ``path`` (a script, an example, a benchmark) imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fused_adam_step(params, grads, m, v, steps, *, op=adcuda._fused_adamw_, **options):
    """One step of the fused Adam ``op`` (AdamW's by default; no amsgrad) with the hyperparameters the
    fused-step tests share; ``options`` gives the rest (``master_params``, ``grad_multiplier``)."""
    op(
        params,
        grads,
        m,
        v,
        [],
        steps,
        lr=1e-2,
        beta1=0.9,
        beta2=0.95,
        weight_decay=0.1,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        **options,
    )


def run_adcuda(*args, cwd, timeout, env=None):
    """``python -m adcuda ARGS`` in ``cwd`` (the command line as a user runs it), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "adcuda", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )


@contextlib.contextmanager
def deadline(seconds):
    """Fail a test that would otherwise hang (SIGALRM interrupts the main thread)."""

    def on_alarm(signum, frame):
        raise TimeoutError(f"test did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def least_squares_problem(lib, dtype="float64"):
    """(A, b, w, c) of a fixed least-squares problem |A w + c - b|^2 in ``lib`` (adcuda or torch), the
    parameters w and c requiring gradients."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 4))
    b = rng.standard_normal(6)
    w0 = rng.standard_normal(4)
    c0 = rng.standard_normal(1)

    def tensor(a):
        return lib.tensor(a, dtype=getattr(lib, dtype))

    return tensor(A), tensor(b), tensor(w0).requires_grad_(), tensor(c0).requires_grad_()


def least_squares_trajectory(lib, make_opt, steps, dtype="float64"):
    """Minimise ``least_squares_problem`` with ``make_opt(lib, groups)`` (two groups, the second with
    its own lr); return the parameters after each step."""
    At, bt, w, c = least_squares_problem(lib, dtype)
    opt = make_opt(lib, [{"params": [w]}, {"params": [c], "lr": 0.02}])
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((At @ w + c - bt) ** 2).sum()
        loss.backward()
        opt.step()
        history.append(np.concatenate([w.detach().numpy().copy(), c.detach().numpy().copy()]))
    return np.array(history)


def native_and_numpy(monkeypatch, backend_module, fn, *args):
    """``fn(*args)`` on the host module's path of a CPU backend module (its ``_NATIVE``), then on its
    NumPy path, the reference: the pair to compare."""
    assert backend_module._NATIVE is not None, f"the host module was built without {backend_module.__name__}'s kernels"
    native = fn(*args)
    with monkeypatch.context() as m:
        m.setattr(backend_module, "_NATIVE", None)
        reference = fn(*args)
    return native, reference


class WatchOps:
    """A dispatch hook that only passes op calls on: attached, it closes the fast lanes and plain cases
    (every call takes the op's general path) and notes the ops it saw."""

    def __init__(self):
        self.seen = []

    def around_op(self, name, op, call, args, kwargs):
        self.seen.append(name)
        return call(*args, **kwargs)


def general_path(fn):
    """``(fn(), the ops it called)`` with a hook attached: the general path of each op call in it."""
    from adcuda.ops import dispatch

    watch = WatchOps()
    dispatch.add_hook(watch)
    try:
        return fn(), watch.seen
    finally:
        dispatch.remove_hook(watch)
