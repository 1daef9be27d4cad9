"""adcuda.compile's replay kernels and memory reuse (program.py's plan, host_steps.py): the CPU
primitives' ``out=``/``scratch=`` keywords (which the replay passes) against the same primitives
without them and against their formulas as written, bit for bit; compiled runs against eager ones on
odd shapes, broadcasting, in-place aliasing and optimizer configurations."""

import functools

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda.backends import cpu
from adcuda.backends.cpu import elementwise as cpu_elementwise
from adcuda.backends.cpu import optim as cpu_optim
from adcuda.capture import host_steps
from adcuda.capture import program as program_module
from adcuda.capture.program import Scratch
from adcuda.errors import IndexOutOfRangeError
from adcuda.ops import layout
from adcuda.tensor import version_counter

SHAPES = [(1,), (7,), (1023,), (3, 5, 7)]


def _values(shape, dtype, seed=0):
    """Normal values with the tails and specials a GELU meets: large |x|, zeros, inf and NaN."""
    x = np.random.default_rng(seed).standard_normal(shape) * 4
    flat = x.reshape(-1)
    for i, special in enumerate((0.0, -0.0, 30.0, -30.0, np.inf, -np.inf, np.nan)):
        if i < flat.size // 2:
            flat[2 * i] = special
    return np.array(x, dtype)  # (an array also for shape (): standard_normal(()) is a scalar)


C = float(np.sqrt(2.0 / np.pi))  # a Python float, as in the primitive: float32 arrays stay float32


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf and NaN on purpose, NumPy called directly
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES + [()])
@pytest.mark.parametrize("avx2", [False, True] if cpu_elementwise._GELU_AVX2 else [False])
def test_gelu_tanh_and_relu_write_into_out_as_they_compute_alone(monkeypatch, shape, dtype, avx2):
    """On each path gelu_tanh has here: NumPy's formulas, and float32's AVX2 loops (their values are
    tests/test_elementwise_host.py's; here, that out= and in-place calls give the call's own bytes)."""
    monkeypatch.setattr(cpu_elementwise, "_GELU_AVX2", avx2)
    x, g = _values(shape, dtype), _values(shape, dtype, seed=1)
    # the formulas as written, one temporary per operation: the in-place chains round the same
    written = 0.5 * x * (1.0 + np.tanh(C * (x + 0.044715 * x * x * x)))
    s = 1.0 / (1.0 + np.exp(-2.0 * (C * (x + 0.044715 * x * x * x))))
    written_grad = g * (s + 2.0 * x * s * (1.0 - s) * C * (1.0 + 3 * 0.044715 * x * x))
    for op, forward, backward in [("gelu_tanh", written, written_grad), ("relu", np.maximum(x, 0), g * (x > 0))]:
        if not (avx2 and op == "gelu_tanh" and dtype == np.float32):
            assert cpu.unary(op, x).tobytes() == np.asarray(forward, dtype).tobytes()
            assert cpu.unary_backward(op, x, None, g).tobytes() == np.asarray(backward, dtype).tobytes()
        scratch = Scratch()
        out = np.empty_like(x)
        assert cpu.unary(op, x, out=out, scratch=scratch) is out
        assert out.tobytes() == cpu.unary(op, x).tobytes()
        assert cpu.unary_backward(op, x, None, g, out=out, scratch=scratch) is out
        assert out.tobytes() == cpu.unary_backward(op, x, None, g).tobytes()
        # written over an operand (the replay's in-place plan), scratch reused from the calls above
        x_in = x.copy()
        assert cpu.unary(op, x_in, out=x_in, scratch=scratch).tobytes() == cpu.unary(op, x).tobytes()
        for into in ("x", "g"):
            x_in, g_in = x.copy(), g.copy()
            got = cpu.unary_backward(op, x_in, None, g_in, out=x_in if into == "x" else g_in, scratch=scratch)
            assert got.tobytes() == cpu.unary_backward(op, x, None, g).tobytes()
    if shape:
        assert Scratch().nbytes == 0 and scratch.nbytes > 0


def test_out_of_an_op_without_an_in_place_formula_is_a_copy():
    x = _values((3, 5), np.float32)
    out = np.empty_like(x)
    assert cpu.unary("sigmoid", x, out=out) is out and out.tobytes() == cpu.unary("sigmoid", x).tobytes()
    assert cpu.unary("exp", x, out=out) is out and out.tobytes() == np.exp(x).tobytes()
    g = _values((3, 5), np.float32, seed=2)
    got = cpu.unary_backward("tanh", None, x, g, out=out)
    assert got is out and out.tobytes() == cpu.unary_backward("tanh", None, x, g).tobytes()


def _fused(y, x, alpha):
    """y + alpha * x rounded once, as PyTorch's add(alpha=) (a fused multiply-add; float64 rounds twice)."""
    if y.dtype != np.float32:
        return y + x * alpha
    return (y.astype(np.float64) + x.astype(np.float64) * np.float64(np.float32(alpha))).astype(np.float32)


def _sgd_written(w, g, b, lr, momentum, dampening, nesterov, weight_decay, first_step):
    """PyTorch's SGD as written (fresh arrays): what sgd_step_ computes in place."""
    d = _fused(g, w, weight_decay) if weight_decay else g
    if momentum:
        b = d if first_step else _fused(b * momentum, d, 1 - dampening)
        d = _fused(d, b, momentum) if nesterov else b
    return _fused(w, d, -lr), b


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize(
    "config",
    [
        dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0),
        dict(momentum=0.9, dampening=0.1, nesterov=False, weight_decay=0.01),
        dict(momentum=0.8, dampening=0.0, nesterov=True, weight_decay=0.0),
    ],
)
@pytest.mark.parametrize("first_step", [True, False])
def test_sgd_step_in_place_with_and_without_scratch_rounds_as_written(dtype, config, first_step):
    shapes = [(7,), (3, 5), ()]
    rng = np.random.default_rng(4)
    ws = [rng.standard_normal(s).astype(dtype) for s in shapes]
    gs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    bs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    results = []
    for scratch in (None, Scratch()):
        w, b = [a.copy() for a in ws], [a.copy() for a in bs]
        cpu.sgd_step_(w, gs, b if config["momentum"] else None, 0.05, first_step=first_step, scratch=scratch, **config)
        results.append((w, b))
    compute = np.float32 if dtype == np.float16 else dtype
    for i in range(len(shapes)):
        w, b = _sgd_written(*(a[i].astype(compute) for a in (ws, gs, bs)), 0.05, **config, first_step=first_step)
        for got_w, got_b in [(r[0][i], r[1][i]) for r in results]:
            assert got_w.tobytes() == np.asarray(w).astype(dtype).tobytes()
            if config["momentum"]:
                assert got_b.tobytes() == np.asarray(b).astype(dtype).tobytes()


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_step_with_and_without_scratch_is_the_same(decoupled, amsgrad):
    shapes = [(7,), (3, 5), ()]
    rng = np.random.default_rng(5)
    start = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(4)]
    start[2] = [np.abs(a) for a in start[2]]
    gs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for scratch in (None, Scratch()):
        w, m, v, vmax = ([a.copy() for a in arrays] for arrays in start)
        for step in (1, 2):
            maxes = vmax if amsgrad else None
            cpu.adam_step_(w, gs, m, v, step, 1e-2, 0.9, 0.99, 1e-8, 0.1, decoupled, None, maxes, scratch=scratch)
        results.append(b"".join(a.tobytes() for a in w + m + v + vmax))
    assert results[0] == results[1]
    assert results[0] != b"".join(a.tobytes() for arrays in start for a in arrays)


def _compiled_against_eager(fn, *inputs, calls=3):
    """``fn`` eager and compiled on the same inputs, every result bit-identical; the program."""
    compiled = adcuda.compile(fn, fullgraph=True)
    for _ in range(calls):
        expected = fn(*inputs)
        got = compiled(*inputs)
        assert got.numpy().tobytes() == expected.numpy().tobytes()
    (program,) = compiled.programs
    assert program.replays == calls - 1
    return program


def test_bias_add_and_activation_are_written_in_place_with_broadcasting():
    w, b = adcuda.randn(7, 5), adcuda.randn(5)

    def f(x):
        return ((x @ w + b).relu() * 0.5 - b).sum(0)

    program = _compiled_against_eager(f, adcuda.randn(3, 7))
    # the bias add writes over the product, relu over the sum, and so on: one buffer for the chain
    assert len(program.in_place) >= 3
    assert len(program.buffers) == 1
    assert "in place of" in str(program)


EARLY_NOTE = "its operands in the cache"


def test_a_reduction_runs_right_after_its_operand_is_made():
    w = adcuda.randn(4, 6)

    def f(x):
        y = x * 2
        z = x @ w
        return y.sum(0) + z.sum()

    program = _compiled_against_eager(f, adcuda.randn(5, 4))
    assert len(program.early) == 2 and str(program).count(EARLY_NOTE) == 2
    order = [int(line.split()[0]) for line in program.lines]
    assert order.index(2) < order.index(1)  # y.sum(0) before the product


def test_a_reduction_does_not_move_above_a_write_of_its_operand():
    w = adcuda.randn(4, 6)

    def f(x):
        y = x * 2
        z = x @ w
        y.add_(1)
        z2 = x @ w
        return y.sum(0) + z.sum() + z2.sum(0)[:4]

    program = _compiled_against_eager(f, adcuda.randn(5, 4))
    reductions = [i for i, s in enumerate(program.trace.steps) if getattr(s, "name", "") == "reduce"]
    written = [i for i, s in enumerate(program.trace.steps) if getattr(s, "name", "") == "copy_"]
    assert all(i not in program.early or program.early[i] >= written[0] for i in reductions)


MEAN_LOSS_NOTE = "one call making"


def _loss_and_gradient_against_eager(loss_of, targets):
    """``loss_of(logits, targets)`` and its backward eager and compiled, three calls each: the loss and
    the weight's gradient bit-identical; the program."""
    w = adcuda.randn(4, 3, requires_grad=True)
    x, y = adcuda.randn(5, 4), adcuda.tensor(targets)

    def f(x):
        loss = loss_of(x @ w, y)
        loss.backward()
        return loss

    compiled = adcuda.compile(f, fullgraph=True)
    for _ in range(3):
        results = []
        for fn in (f, compiled):
            w.grad = None
            results.append((fn(x).detach().numpy().tobytes(), w.grad.numpy().tobytes()))
        assert results[0] == results[1]
    return compiled.programs[0]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (every target ignored: 0 / 0)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("targets", [[0, 2, 1, 1, 0], [0, -100, 2, -100, 1], [-100] * 5], ids=["all", "some", "none"])
def test_the_mean_cross_entropy_and_its_gradient_are_one_call(targets, smoothing):
    """The loss and the gradient after it, bytes of eager's, every target ignored too (NaN loss, zero
    gradient); the eleven calls one in the program."""
    program = _loss_and_gradient_against_eager(lambda z, y: F.cross_entropy(z, y, label_smoothing=smoothing), targets)
    assert str(program).count(MEAN_LOSS_NOTE) == 1
    assert str(program).count("a step of the mean cross-entropy") == 10


@pytest.mark.parametrize(
    "loss_of",
    [
        lambda z, y: F.cross_entropy(z, y, reduction="sum"),  # no division by the count
        lambda z, y: F.cross_entropy(z.double(), y),  # float64 logits
        lambda z, y: F.cross_entropy(z, y) + F.cross_entropy(z, y, reduction="none")[0],  # the rows read as well
    ],
    ids=["sum", "float64", "rows read"],
)
def test_other_cross_entropies_are_left_as_recorded(loss_of):
    program = _loss_and_gradient_against_eager(loss_of, [0, 2, 1, 1, 0])
    assert MEAN_LOSS_NOTE not in str(program)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf and NaN on purpose, NumPy called directly
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5, 7), (64, 33)])
def test_native_bias_relu_and_relu_backward_give_the_numpy_steps_bytes(shape, dtype):
    """The replay's one-pass relu kernels against the NumPy calls they stand for (the bias add then the
    CPU primitive's relu; the primitive's relu backward), specials included, out= a fresh array or an
    operand's own memory."""
    x, g, bias = _values(shape, dtype), _values(shape, dtype, seed=1), _values(shape[-1:], dtype, seed=2)
    added = np.add(x, bias)
    expected = cpu.unary("relu", added).tobytes()
    expected_grad = cpu.unary_backward("relu", x, None, g).tobytes()
    for out in (np.empty_like(x), x.copy()):
        a = x if out.tobytes() != x.tobytes() else out  # the second: out is the operand itself
        assert program_module._bias_relu(a, bias, out) is out
        assert out.tobytes() == expected
    for alias in ("fresh", "x", "g"):
        xs, gs = x.copy(), g.copy()
        out = {"fresh": np.empty_like(x), "x": xs, "g": gs}[alias]
        assert program_module._relu_backward(xs, None, gs, out) is out
        assert out.tobytes() == expected_grad
    # strided operands take the NumPy calls themselves
    wide = np.repeat(x, 2, axis=-1)[..., ::2]
    out = np.empty_like(x)
    assert program_module._bias_relu(wide, bias, out).tobytes() == expected
    assert program_module._relu_backward(wide, None, g, out).tobytes() == expected_grad


def test_a_relu_after_a_bias_add_is_fused_into_it_and_the_backward_runs_natively():
    lin1, lin2 = adcuda.nn.Linear(7, 6), adcuda.nn.Linear(6, 3)
    opt = adcuda.optim.SGD([*lin1.parameters(), *lin2.parameters()], lr=0.0)

    def f(x):
        opt.zero_grad()
        h = lin1(x).relu()
        loss = (lin2(h).relu() * 2.0).sum()
        loss.backward()
        return loss.detach() + lin1.weight.grad.sum() + lin2.bias.grad.sum()

    program = _compiled_against_eager(f, adcuda.randn(5, 7))
    assert len(program.fused) == 2
    fused = {program.trace.steps[i].args[0] for i in program.fused}
    assert fused == {"relu"}
    kernels = {program.kernels[i][0] for i in program.kernels}
    assert program_module._bias_relu in kernels and program_module._relu_backward in kernels
    assert "computed by step" in str(program)


def test_a_bias_add_read_elsewhere_keeps_its_own_relu():
    w, b = adcuda.randn(7, 5), adcuda.randn(5)

    def f(x):
        s = x @ w + b
        return s.relu() + s  # the sum is read after the relu: no fusion writes the relu over it

    program = _compiled_against_eager(f, adcuda.randn(3, 7))
    assert program.fused == {}


def test_gelu_tanh_forward_and_backward_replay_the_primitive_into_buffers():
    lin = adcuda.nn.Linear(6, 9)

    def f(x):
        y = F.gelu(lin(x), approximate="tanh")
        y.sum().backward()
        return y.detach() * 1.0

    program = _compiled_against_eager(f, adcuda.randn(4, 6))
    gelu = [
        kernel
        for i, (kernel, _) in program.kernels.items()
        if getattr(program.trace.steps[i], "args", (None,))[0] == "gelu_tanh"
    ]
    # forward and backward: the CPU primitive itself, given an out= and the program's scratch arrays
    assert [k.func for k in gelu] == [cpu.unary, cpu.unary_backward]
    assert all(isinstance(k, functools.partial) and k.keywords["scratch"] is program.scratch for k in gelu)
    assert {shape for shape, _, _ in program.scratch.arrays} == {(4, 9)}


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
@pytest.mark.parametrize("avx2", [False, True] if cpu_elementwise._GELU_AVX2 else [False])
def test_gelu_tanh_over_arrays_bigger_than_a_chunk_runs_in_chunks_bit_for_bit(monkeypatch, dtype, avx2):
    # 64 bytes a chunk: the 5x9 arrays in chunks of 16 float32 (8 float64) elements and a shorter rest
    monkeypatch.setattr(program_module, "CHUNK_BYTES", 64)
    monkeypatch.setattr(cpu_elementwise, "_GELU_AVX2", avx2)
    w = adcuda.randn(6, 9, dtype=dtype, requires_grad=True)

    def f(x):
        y = F.gelu(x @ w, approximate="tanh")
        (y * y).sum().backward()
        return y.detach() * 1.0

    x = adcuda.randn(5, 6, dtype=dtype)
    compiled = adcuda.compile(f, fullgraph=True)
    runs = []
    for fn in (f, compiled, compiled, compiled):
        w.grad = None
        runs.append((fn(x).numpy().tobytes(), w.grad.numpy().tobytes()))
    assert runs[1:] == runs[:1] * 3
    (program,) = compiled.programs
    text = str(program)
    assert "inner kept in place" in text and "inner read in place" in text
    gelu = [k for i, (k, _) in program.kernels.items() if program.trace.steps[i].args[0] == "gelu_tanh"]
    assert len(gelu) == 2 and not any(isinstance(k, functools.partial) for k in gelu)  # the chunked kernels
    step = 64 // np.dtype(dtype.numpy).itemsize
    scratch = {shape for shape, _, _ in program.scratch.arrays}
    assert scratch == (set() if avx2 and dtype == adcuda.float32 else {(step,), (45 % step,)})  # (AVX2: none)


def test_calls_whose_results_nothing_reads_are_left_out():
    leaf = adcuda.randn(4, 4, requires_grad=True)

    def f(x):
        h = (leaf * x).relu()
        (h + 1.0).sum()  # computed and dropped: the add and the sum are left out
        # a row-major array made row-major: the same array, no call (the op itself: Tensor.contiguous of
        # a contiguous tensor returns it before any dispatch, so its call never reaches the program)
        loss = layout.contiguous(h * h).sum()
        loss.backward()
        return loss.detach()

    x = adcuda.randn(4, 4)
    compiled = adcuda.compile(f, fullgraph=True)
    runs = []
    for fn in (f, compiled, compiled, compiled):
        leaf.grad = None
        runs.append((fn(x).numpy().tobytes(), leaf.grad.numpy().tobytes()))
    assert runs[1:] == runs[:1] * 3
    (program,) = compiled.programs
    lines = str(program).splitlines()
    unread = [line for line in lines if "(left out: nothing reads what it returns)" in line]
    assert len(unread) == 2 and "binary('add'" in unread[0] and "reduce('sum'" in unread[1]
    (same,) = [line for line in lines if "(left out: it returns its operand)" in line]
    assert "contiguous(" in same
    assert "3 left out as no-ops or unread" in lines[0]
    assert program.source.count("p_reduce") == 1 and "p_contiguous" not in program.source  # the loss returned


def test_views_of_arrays_that_are_the_same_on_every_replay_are_made_once():
    w = adcuda.randn(5, 3, requires_grad=True)

    def f(x):
        y = (x * 2.0) @ w.t().t()  # views of a parameter
        y.sum().backward()  # the backward expands a buffer's scalar
        return y.detach(), w.detach().t()  # a view handed back to the caller: made on each replay

    x = adcuda.randn(4, 5)
    compiled = adcuda.compile(f, fullgraph=True)
    runs = []
    for fn in (f, compiled, compiled, compiled):
        w.grad = None
        y, wt = fn(x)
        runs.append((y.numpy().tobytes(), w.grad.numpy().tobytes(), wt.numpy().tobytes()))
    assert runs[1:] == runs[:1] * 3
    (program,) = compiled.programs
    made_once = [line for line in str(program).splitlines() if "a view made once" in line]
    assert any("expand(" in line for line in made_once) and any("permute(<persistent" in line for line in made_once)
    assert "p_expand" not in program.source
    assert compiled(x)[1]._data is not compiled(x)[1]._data  # the caller's view: a new array each call


def test_an_operand_read_later_is_not_overwritten():
    def f(x):
        y = x * 2.0
        z = y.exp()  # y is read again below: z may not take its memory
        return z + y

    program = _compiled_against_eager(f, adcuda.randn(5, 3))
    steps = program.trace.steps
    exp_step = next(i for i, s in enumerate(steps) if getattr(s, "args", (None,))[0] == "exp")
    assert exp_step not in program.in_place


def test_results_taken_from_dying_operands_stay_fresh_across_replays():
    @adcuda.compile
    def f(x):
        return (x * 2.0 + 1.0).tanh()  # the result outlives the replay: never a shared buffer

    results = [f(adcuda.full((3, 4), float(i))) for i in range(4)]
    assert [float(r.numpy()[0, 0]) for r in results] == [float(np.tanh(np.float32(2 * i + 1))) for i in range(4)]
    assert len({id(r._data) for r in results}) == 4


def test_a_copy_into_its_own_dtype_is_no_copy_and_a_zero_fill_is_a_buffer():
    w = adcuda.randn(4, 6, requires_grad=True)

    def step(x):
        # an out-of-place write into the product, which nothing reads after it: a same-dtype copy, and a
        # scatter; the slice's backward: zeros and a scatter
        y = (x @ w).index_put((adcuda.tensor([0, 2]),), adcuda.tensor(0.5))
        y[:, 1:4].sum().backward()
        return w.grad * 1.0

    x = adcuda.randn(3, 4)
    compiled = adcuda.compile(step, fullgraph=True)
    for _ in range(3):
        w.grad = None
        eager = step(x)
        w.grad = None
        got = compiled(x)
        assert got.numpy().tobytes() == eager.numpy().tobytes()
    (program,) = compiled.programs
    steps = program.trace.steps
    fills = [i for i, s in enumerate(steps) if getattr(s, "name", "") == "full" and s.args[0] == (3, 6)]
    copies = [i for i, s in enumerate(steps) if getattr(s, "name", "") == "astype"]
    assert fills and all(steps[i].results[0] in program.buffer_of for i in fills)
    assert copies and all(i in program.aliases for i in copies)
    assert "no copy: the memory of" in str(program)


def test_a_transposed_operand_is_copied_into_a_buffer():
    def f(x, y):
        return (x.t().contiguous() + y).sum(1)

    program = _compiled_against_eager(f, adcuda.randn(5, 3), adcuda.randn(3, 5))
    copies = [i for i, s in enumerate(program.trace.steps) if getattr(s, "name", "") == "contiguous"]
    assert any(i in program.kernels for i in copies)


# ------------------------------------------------------------------------------------ optimizer steps
def _train(make_opt, steps=6, dtype=adcuda.float32, change=None):
    """Eager and compiled runs of an MLP step with the optimizer ``make_opt`` builds: parameters,
    optimizer state and version counters bit-identical after each step. ``change(opt, i)`` may change
    a hyperparameter between steps."""
    runs = []
    for compiled in (False, True):
        adcuda.manual_seed(0)
        model = adcuda.nn.Sequential(adcuda.nn.Linear(7, 13), adcuda.nn.Tanh(), adcuda.nn.Linear(13, 3)).to(dtype)
        opt = make_opt(model.parameters())
        x = adcuda.randn(5, 7, dtype=dtype)
        y = adcuda.tensor([0, 2, 1, 1, 0])

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = adcuda.compile(step, fullgraph=True) if compiled else step
        history = []
        for i in range(steps):
            if change is not None:
                change(opt, i)
            history.append(fn(x, y).detach().numpy().tobytes())
        state = [
            (k, v.detach().numpy().tobytes() if isinstance(v, adcuda.Tensor) else v)
            for p in model.parameters()
            for k, v in sorted(opt.state[p].items())
        ]
        versions = [version_counter(p).value for p in model.parameters()]
        runs.append((history, [p.detach().numpy().tobytes() for p in model.parameters()], state, versions, fn))
    (eager, eager_params, eager_state, eager_versions, _), (got, params, state, versions, fn) = runs
    assert got == eager
    assert params == eager_params
    assert state == eager_state
    assert versions == eager_versions
    return fn.programs[0]


OPTIMIZERS = {
    "sgd": lambda ps: adcuda.optim.SGD(ps, lr=0.1),
    "sgd momentum dampening weight decay": lambda ps: adcuda.optim.SGD(
        ps, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01
    ),
    "sgd nesterov": lambda ps: adcuda.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
    "adam l2": lambda ps: adcuda.optim.Adam(ps, lr=1e-2, weight_decay=0.1),
    "adamw": lambda ps: adcuda.optim.AdamW(ps, lr=1e-2, betas=(0.8, 0.9), eps=1e-6),
}


OPTIMIZERS.update(
    {
        "adam amsgrad": lambda ps: adcuda.optim.Adam(ps, lr=1e-2, amsgrad=True),
        "sgd maximize": lambda ps: adcuda.optim.SGD(ps, lr=0.1, maximize=True),
    }
)
PROTOCOL = "replayed by its _step_with_scratch"


@pytest.mark.parametrize("native", [True, False], ids=["native step", "numpy step"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_steps_replayed_with_the_programs_scratch_match_eager(name, native, monkeypatch):
    """Both CPU paths of a float32 step: the native one-pass step (kernels/host/optim.cpp), which needs
    no temporaries, and the NumPy one."""
    if not native:
        monkeypatch.setattr(cpu_optim, "_NATIVE", None)
    program = _train(OPTIMIZERS[name])
    assert PROTOCOL in str(program)
    shapes = {shape for shape, _, _ in program.scratch.arrays}
    if not native:
        # the step's primitive took its temporaries from the program's scratch arrays: one per tensor
        # shape, or (Adam, which updates a group's tensors gathered) of them all
        assert {(13, 7), (13,), (3, 13), (3,)} <= shapes or (13 * 7 + 13 + 3 * 13 + 3,) in shapes


@pytest.mark.parametrize(
    "name, plain",
    [("sgd", True), ("sgd momentum dampening weight decay", True), ("sgd nesterov", True), ("sgd maximize", False)],
)
def test_plain_float32_sgd_groups_are_stepped_by_the_primitive_directly(name, plain, monkeypatch):
    """host_steps.py's SGD path where it applies (the numbers, state and versions of ``_train``'s eager
    run), the optimizer's own step where it does not."""
    taken = []

    def watched(opt, scratch):
        taken.append(plain_step(opt, scratch))
        return taken[-1]

    plain_step = host_steps._plain_sgd_step
    monkeypatch.setattr(host_steps, "_plain_sgd_step", watched)
    _train(OPTIMIZERS[name])
    assert taken and set(taken) == {plain}


def test_a_tensor_learning_rate_and_a_parameter_without_gradient_in_the_sgd_replay():
    def change(opt, i):
        if i == 2:
            opt.param_groups[0]["lr"] = adcuda.tensor(0.05)
        if i == 4:
            opt.param_groups[0]["lr"] = 0.02

    def make(ps):
        ps = list(ps)
        return adcuda.optim.SGD([{"params": ps}, {"params": [adcuda.zeros(4, requires_grad=True)]}], lr=0.1)

    _train(make, change=change)


def test_float64_parameters_and_a_learning_rate_changed_between_steps():
    def change(opt, i):
        opt.param_groups[0]["lr"] = 0.1 / (i + 1)

    _train(lambda ps: adcuda.optim.AdamW(ps, lr=0.1), dtype=adcuda.float64, change=change)


def test_a_changed_momentum_flows_into_the_replay():
    def change(opt, i):
        if i == 3:
            opt.param_groups[0]["momentum"] = 0.5

    _train(lambda ps: adcuda.optim.SGD(ps, lr=0.05, momentum=0.9), change=change)


class _SGDWithItsOwnStep(adcuda.optim.SGD):
    def step(self, closure=None):
        for group in self.param_groups:
            group["lr"] *= 0.5
        return super().step(closure)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: adcuda.optim.RMSprop(ps, lr=1e-2),  # no protocol
        lambda ps: _SGDWithItsOwnStep(ps, lr=0.1),  # a step of its own: the protocol is SGD's
    ],
)
def test_optimizers_without_the_protocol_replay_their_step(make):
    program = _train(make)
    assert PROTOCOL not in str(program)


def test_an_out_of_range_target_still_raises_on_replay():
    w = adcuda.randn(4, 3)

    @adcuda.compile
    def loss_of(x, y):
        return F.cross_entropy(x @ w, y)

    x = adcuda.randn(2, 4)
    loss_of(x, adcuda.tensor([0, 2]))
    loss_of(x, adcuda.tensor([1, 2]))
    # checked on every replay: by a host step, or on the CPU inside the nll_loss primitive's one pass
    program = str(loss_of.programs[0])
    assert "host step _check_class_targets" in program or "nll_loss(" in program
    with pytest.raises(IndexOutOfRangeError, match="target 3 is out of bounds for 3 classes"):
        loss_of(x, adcuda.tensor([0, 3]))
    loss_of(x, adcuda.tensor([-100, 1]))  # ignore_index passes


@pytest.mark.parametrize("seed", range(6))
def test_random_elementwise_chains_with_views_and_in_place_ops(seed):
    """Chains of elementwise ops over odd shapes with broadcasting, views, reshapes, in-place updates
    and results read again later: whatever the plan writes in place, the values are eager's."""
    rng = np.random.default_rng(seed)
    ops = [
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: (a - b).relu(),
        lambda a, b: a.tanh() * b,
        lambda a, b: F.gelu(a, approximate="tanh") + b,
        lambda a, b: a.exp().clamp(max=4.0) - b,
        lambda a, b: (a.t().contiguous().t() + b).sigmoid(),
        lambda a, b: a.reshape(-1).view(a.shape) * 2.0 + b.sum(0, keepdim=True),
    ]
    rows, cols = int(rng.integers(1, 9)), int(rng.choice([1, 7, 33]))
    picks = [int(i) for i in rng.integers(0, len(ops), 8)]
    keeps = [bool(k) for k in rng.integers(0, 2, 8)]
    bias = adcuda.tensor(rng.standard_normal(cols).astype(np.float32))

    def f(x):
        h, kept = x, []
        for pick, keep in zip(picks, keeps):
            h = ops[pick](h, bias)
            if keep:
                kept.append(h)  # read again at the end: the plan may not write over it
            else:
                h = h.clone()
                h.mul_(0.5)  # an in-place op on a fresh array
        for k in kept:
            h = h + k
        return h

    x = adcuda.tensor(rng.standard_normal((rows, cols)).astype(np.float32))
    program = _compiled_against_eager(f, x, calls=4)
    assert program.kernels


def _slices_backward_program(columns):
    """Eager and compiled gradients of a (4, 9) leaf read in the column ranges ``columns``, each piece
    multiplied by values holding -0.0, inf and NaN, bit for bit over three calls; the program."""
    w = adcuda.randn(4, 9, requires_grad=True)
    specials = np.random.default_rng(0).standard_normal((4, 9)).astype(np.float32)
    specials[0, :] = -0.0
    specials[1, ::4] = np.inf
    specials[2, 1::3] = np.nan
    factors = adcuda.from_numpy(specials)

    def f():
        h = w * 2.0  # (the sum of the pieces' gradients flows on, into this product's backward)
        loss = sum(((h[:, lo:hi] * factors[:, lo:hi]).sum() for lo, hi in columns), adcuda.zeros(()))
        loss.backward()
        return loss

    compiled = adcuda.compile(f, fullgraph=True)
    for _ in range(3):
        w.grad = None
        f()
        expected = w.grad.numpy().tobytes()
        w.grad = None
        compiled()
        assert w.grad.numpy().tobytes() == expected
    (program,) = compiled.programs
    return program


def test_the_backward_of_disjoint_slices_writes_one_array_without_zero_fills_or_sums():
    # q, k and v cut out of one product: three zero arrays, a slice of each written, two sums in eager
    program = _slices_backward_program([(0, 3), (3, 6), (6, 9)])
    text = str(program)
    assert text.count("fused sum: the array of") == 2
    assert text.count("left out: a zero piece") >= 2
    assert "not filled: a fused sum writes all of it" in text  # every column is some slice's


def test_a_fused_sum_of_slices_that_leave_columns_out_keeps_the_zero_fill():
    program = _slices_backward_program([(0, 2), (5, 9)])
    text = str(program)
    assert text.count("fused sum: the array of") == 1
    assert "not filled" not in text


def test_overlapping_slices_are_summed_as_in_eager():
    program = _slices_backward_program([(0, 5), (4, 9)])
    assert "fused sum" not in str(program)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_keeps_the_probabilities_its_backward_computes_again(dtype, is_causal):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in [(2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)])
    g = rng.standard_normal((2, 3, 5, 6)).astype(dtype)
    out, lse = cpu.attention(q, k, v, None, is_causal, 0.5)
    probs = np.full((2, 3, 5, 7), np.nan, dtype)
    kept_out, kept_lse = cpu.attention(q, k, v, None, is_causal, 0.5, probs=probs)
    assert kept_out.tobytes() == out.tobytes() and kept_lse.tobytes() == lse.tobytes()
    softmax = np.exp(0.5 * q @ np.swapaxes(k, -1, -2) - lse[..., None])
    if is_causal:
        softmax = np.where(np.tril(np.ones((5, 7), bool)), softmax, 0)
    np.testing.assert_allclose(probs, softmax, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7)
    expected = cpu.attention_backward(g, q, k, v, out, lse, None, is_causal, 0.5)
    given = cpu.attention_backward(g, q, k, v, out, lse, None, is_causal, 0.5, probs=probs)
    assert [a.tobytes() for a in given] == [a.tobytes() for a in expected]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf and NaN on purpose, NumPy called directly
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_tanh_keeps_tanhs_argument_for_its_backward(dtype):
    x, g = _values((3, 5, 7), dtype), _values((3, 5, 7), dtype, seed=1)
    scratch, inner = Scratch(), np.full(x.shape, np.nan, dtype)
    forward = cpu.unary("gelu_tanh", x, out=np.empty_like(x), scratch=scratch, inner=inner)
    assert forward.tobytes() == cpu.unary("gelu_tanh", x).tobytes()
    assert inner.tobytes() == np.asarray(C * (x + 0.044715 * x * x * x), dtype).tobytes()
    backward = cpu.unary_backward("gelu_tanh", x, None, g, out=np.empty_like(x), scratch=scratch, inner=inner)
    assert backward.tobytes() == cpu.unary_backward("gelu_tanh", x, None, g).tobytes()
    with pytest.raises(ValueError, match="inner= is gelu_tanh's"):
        cpu.unary("relu", x, out=np.empty_like(x), inner=inner)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_keeps_the_normalised_input_for_its_backward(dtype):
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((4, 3, 6)).astype(dtype), rng.standard_normal((4, 3, 6)).astype(dtype)
    w, b = rng.standard_normal((3, 6)).astype(dtype), rng.standard_normal((3, 6)).astype(dtype)
    expected = cpu.layer_norm(x, w, b, 2, 1e-5)
    xhat = np.full(x.shape, np.nan, dtype)
    kept = cpu.layer_norm(x, w, b, 2, 1e-5, xhat=xhat)
    assert [a.tobytes() for a in kept] == [a.tobytes() for a in expected]
    _, mean, rstd = expected
    assert xhat.tobytes() == ((x - mean) * rstd).tobytes()
    without = cpu.layer_norm_backward(g, x, w, mean, rstd, 2)
    given = cpu.layer_norm_backward(g, x, w, mean, rstd, 2, xhat=xhat)
    assert [a.tobytes() for a in given] == [a.tobytes() for a in without]
    assert xhat.tobytes() == ((x - mean) * rstd).tobytes()  # read, not written


def test_compiled_backwards_read_what_their_forwards_kept():
    qkv, norm, fc = adcuda.nn.Linear(8, 24), adcuda.nn.LayerNorm(8), adcuda.nn.Linear(8, 16)
    params = [*qkv.parameters(), *norm.parameters(), *fc.parameters()]

    def f(x):
        q, k, v = qkv(norm(x)).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 8)
        z = F.gelu(fc(y), approximate="tanh")
        (z * z).sum().backward()
        return z.detach() * 1.0

    x = adcuda.randn(2, 5, 8)
    program = _compiled_against_eager(f, x)
    text = str(program)
    for keyword in ("probs", "xhat", "inner"):
        assert f"{keyword} kept in place" in text and f"{keyword} read in place" in text
    # q, k and v are permuted views of one product: attention reads them, not copies of them
    steps = program.trace.steps
    attention = [s for s in steps if getattr(s, "name", "") in ("attention", "attention_backward")]
    assert len(attention) == 2
    for step in attention:
        makers = {steps[program.trace.producer[a.n]].name for a in step.args[:4] if hasattr(a, "n")}
        assert makers and "contiguous" not in makers, makers
    # the forward writes its output into the buffer of the heads' row-major copy, which its backward
    # then reads as the output (through the permutation), the copy left out
    (forward,) = [i for i, s in enumerate(steps) if getattr(s, "name", "") == "attention"]
    assert forward in program.into
    assert "no copy: attention wrote its result there" in text
    # and the gradients they made are eager's, bit for bit
    compiled = adcuda.compile(f, fullgraph=True)
    grads = []
    for fn in (f, compiled, compiled):
        for p in params:
            p.grad = None
        fn(x)
        grads.append([p.grad.numpy().tobytes() for p in params])
    assert grads[0] == grads[1] == grads[2]


def test_attention_without_a_backward_writes_its_output_into_the_copys_buffer():
    qkv, out = adcuda.nn.Linear(8, 24), adcuda.nn.Linear(8, 3)

    def f(x):
        with adcuda.no_grad():
            q, k, v = qkv(x).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 8)
            return out(y) * 1.0

    program = _compiled_against_eager(f, adcuda.randn(2, 5, 8))
    (step,) = program.into
    assert program.trace.steps[step].name == "attention"
    # the output is the heads' permuted view of the buffer its row-major copy was going to
    assert any(np.shares_memory(program.into[step], buffer) for buffer in program.buffer_arrays)
    text = str(program)
    assert "no copy: attention wrote its result there" in text and "left out: attention wrote its result there" in text


@pytest.mark.parametrize("write", [False, True])
def test_attention_output_its_backward_reads_shares_the_copys_buffer_only_while_nothing_writes_it(write):
    qkv, out = adcuda.nn.Linear(8, 24), adcuda.nn.Linear(8, 3)
    params = [*qkv.parameters(), *out.parameters()]

    def f(x):
        q, k, v = qkv(x).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 8)
        if write:
            y.mul_(2.0)  # the copy written in place: the backward must still read the output eager saved
        (out(y) ** 2).sum().backward()
        return y.detach() * 1.0

    for p in params:
        p.grad = None
    program = _compiled_against_eager(f, adcuda.randn(2, 5, 8))
    forward = [i for i, s in enumerate(program.trace.steps) if getattr(s, "name", "") == "attention"]
    assert (forward[0] in program.into) is not write
    compiled = adcuda.compile(f, fullgraph=True)
    grads = []
    for fn in (f, compiled, compiled):
        for p in params:
            p.grad = None
        fn(adcuda.ones(2, 5, 8))
        grads.append([p.grad.numpy().tobytes() for p in params])
    assert grads[0] == grads[1] == grads[2]


def test_a_copy_that_something_else_reads_too_is_made():
    qkv = adcuda.nn.Linear(8, 24)

    def f(x):
        q, k, v = qkv(x).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) + q.exp()  # the copy of q read twice
        (y * y).sum().backward()
        return y.detach() * 1.0

    text = str(_compiled_against_eager(f, adcuda.randn(2, 5, 8)))
    copies = [line for line in text.splitlines() if " = contiguous(" in line]
    assert sum("attention reads the view" in line for line in copies) == 2  # k's and v's, only attention reads
    assert any("attention reads the view" not in line and "buffer" in line for line in copies)  # q's copy


def test_a_kept_attention_with_dropout_draws_the_eager_masks():
    qkv = adcuda.nn.Linear(8, 24)

    def step(x):
        q, k, v = qkv(x).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
        out.sum().backward()
        return out.detach()

    x = adcuda.randn(2, 5, 8)
    compiled = adcuda.compile(step, fullgraph=True)
    results = {}
    for name, fn in (("eager", step), ("compiled", compiled)):
        adcuda.manual_seed(3)
        runs = []
        for _ in range(4):
            for p in qkv.parameters():
                p.grad = None
            runs.append((fn(x).numpy().tobytes(), [p.grad.numpy().tobytes() for p in qkv.parameters()]))
        results[name] = runs
    assert results["compiled"] == results["eager"]
    assert len({out for out, _ in results["compiled"]}) == 4  # a new mask on every call
    assert "probs kept in place" in str(compiled.programs[0])
