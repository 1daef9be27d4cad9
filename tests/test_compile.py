"""adcuda.compile: captured and replayed training steps against eager runs of the same steps.

On the CPU a replay calls the same primitives in the same order as eager (into preallocated buffers
where the primitive allows), so losses and parameters must be bit-identical, not just close."""

import warnings

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.amp import GradScaler
from adcuda.capture import CaptureError
from adcuda.train.models import GPT

STEPS = 32


def _batches(n, shape, classes, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            adcuda.tensor(rng.standard_normal(shape).astype(np.float32)),
            adcuda.tensor(rng.integers(0, classes, shape[0])),
        )
        for _ in range(n)
    ]


def _mlp():
    adcuda.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 5))


def _bytes(t):
    return t.detach().numpy().tobytes()


def _state(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _assert_same_run(make, batches, steps=STEPS):
    """Run ``make()``'s step eagerly and compiled on the same batches; every loss and every parameter
    bit-identical, and the compiled one replayed (one program, run on every call after the first)."""
    eager_model, eager_step = make()
    model, step = make()
    compiled = adcuda.compile(step)
    for i in range(steps):
        x, y = batches[i % len(batches)]
        expected = eager_step(x, y)
        got = compiled(x, y)
        assert _bytes(got) == _bytes(expected), f"step {i}: {got.item()} != {expected.item()}"
    for p, q in zip(_state(eager_model), _state(model)):
        assert p.tobytes() == q.tobytes()
    assert len(compiled.programs) == 1
    assert compiled.programs[0].replays >= steps - 2
    return compiled


def test_mlp_adamw_steps_are_bit_identical():
    def make():
        model = _mlp()
        opt = adcuda.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return model, step

    compiled = _assert_same_run(make, _batches(4, (16, 20), 5))
    program = compiled.programs[0]
    assert program.kernels, "no primitive call writes into a preallocated buffer"
    assert len(program.buffers) < len(program.kernels), "no buffer is reused"


def _gpt_training(dropout, dtype=adcuda.float32):
    """A maker of (model, AdamW step) of a small GPT, as ``_assert_same_run`` takes; the generator seeded
    alike after each, so that both runs draw dropout masks from the same stream."""

    def make():
        adcuda.manual_seed(0)
        model = GPT(vocab_size=11, block_size=8, d_model=16, n_layers=2, n_heads=2, dropout=dropout).to(dtype)
        opt = adcuda.optim.AdamW(model.parameters(), lr=1e-2)

        def step(x, y):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, 11), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        adcuda.manual_seed(1)
        return model, step

    return make


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
def test_gpt_steps_with_attention_writing_its_gradients_into_place_are_bit_identical(dtype):
    rng = np.random.default_rng(0)
    batches = [(adcuda.tensor(rng.integers(0, 11, (4, 8))), adcuda.tensor(rng.integers(0, 11, (4, 8))))]
    compiled = _assert_same_run(_gpt_training(0.0, dtype), batches, steps=8)
    (program,) = compiled.programs
    # each layer's dq, dk and dv go straight into their slices of the q, k and v product's gradient, and
    # its output into the buffer of the heads' row-major copy (which the backward reads as the output)
    steps = program.trace.steps
    backwards = {i: d for i, d in program.into.items() if steps[i].name == "attention_backward"}
    assert len(backwards) == 2 and len(program.into) == 4
    assert all(all(d is not None for d in dests) for dests in backwards.values())
    assert str(program).count("attention wrote its result there") == 2 * 3 * 4 + 2 * 2


def test_gpt_with_dropout_draws_fresh_numbers_from_the_same_stream():
    make = _gpt_training(0.2)
    rng = np.random.default_rng(0)
    batches = [
        (adcuda.tensor(rng.integers(0, 11, (4, 8))), adcuda.tensor(rng.integers(0, 11, (4, 8)))) for _ in range(3)
    ]
    eager_model, eager_step = make()
    eager = [eager_step(*batches[i % 3]).item() for i in range(STEPS)]
    model, step = make()
    compiled = adcuda.compile(step)
    got = [compiled(*batches[i % 3]).item() for i in range(STEPS)]
    assert got == eager
    assert len(set(got[::3])) > 1  # the same batch gives a new loss each time: fresh dropout masks
    for p, q in zip(_state(eager_model), _state(model)):
        assert p.tobytes() == q.tobytes()
    program = compiled.programs[0]
    assert "draw" in str(program) and program.replays >= STEPS - 2


@pytest.mark.filterwarnings("ignore:GradScaler")
@pytest.mark.filterwarnings("error::RuntimeWarning")  # the overflow says nothing, replayed or eager
def test_grad_scaler_with_an_overflowing_step_clipping_and_a_scheduler():
    def make():
        model = _mlp()
        opt = adcuda.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        sched = adcuda.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
        scaler = GradScaler("cpu", init_scale=2.0**16, growth_interval=4)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            adcuda.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
            sched.step()
            return loss

        model.scaler, model.opt = scaler, opt
        return model, step

    batches = _batches(4, (16, 20), 5)
    overflow = adcuda.tensor(np.full((16, 20), 3e38, np.float32))
    batches[2] = (overflow, batches[2][1])  # inf gradients: the step is skipped and the scale backs off
    eager_model, eager_step = make()
    model, step = make()
    compiled = adcuda.compile(step)
    for i in range(STEPS):
        x, y = batches[i % 4]
        expected, got = eager_step(x, y), compiled(x, y)
        assert _bytes(got) == _bytes(expected)
        assert eager_model.scaler.get_scale() == model.scaler.get_scale()
        assert eager_model.opt.param_groups[0]["lr"] == model.opt.param_groups[0]["lr"]
    assert model.scaler.get_scale() < 2.0**16  # it did back off
    for p, q in zip(_state(eager_model), _state(model)):
        assert p.tobytes() == q.tobytes()
    assert compiled.programs and compiled.programs[0].replays >= STEPS - 3


def test_a_learning_rate_changed_between_calls_reaches_the_replay():
    def make():
        model = _mlp()
        opt = adcuda.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss

        model.opt = opt
        return model, step

    rng = np.random.default_rng(1)
    x = adcuda.tensor(rng.standard_normal((8, 20)).astype(np.float32))
    y = adcuda.tensor(rng.standard_normal((8, 5)).astype(np.float32))
    eager_model, eager_step = make()
    model, step = make()
    compiled = adcuda.compile(step)
    for i in range(6):
        for m in (eager_model, model):
            m.opt.param_groups[0]["lr"] = 0.1 / (i + 1)
        assert compiled(x, y).item() == eager_step(x, y).item()
    for p, q in zip(_state(eager_model), _state(model)):
        assert p.tobytes() == q.tobytes()


def test_a_new_batch_size_is_captured_anew():
    model = _mlp()

    @adcuda.compile
    def forward(x):
        with adcuda.no_grad():
            return model(x).sum(dim=1)

    for batch in (4, 4, 9, 9, 4):
        x = adcuda.randn(batch, 20)
        with adcuda.no_grad():
            expected = model(x).sum(dim=1)
        assert forward(x).numpy().tobytes() == expected.numpy().tobytes()
    assert len(forward.programs) == 2


def test_a_rebound_parameter_is_seen_not_replayed_stale():
    model = nn.Linear(3, 2)

    @adcuda.compile
    def forward(x):
        with adcuda.no_grad():
            return model(x)

    x = adcuda.ones(1, 3)
    forward(x)
    forward(x)
    model.weight.data = adcuda.zeros(2, 3)  # a new array: the program's guard fails and it captures again
    with adcuda.no_grad():
        assert np.array_equal(forward(x).numpy(), model(x).numpy())


def test_a_host_read_falls_back_to_eager_with_one_warning():
    model = _mlp()
    opt = adcuda.optim.SGD(model.parameters(), lr=0.1)
    seen = []

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        seen.append(loss.item())  # a value read on the host: the capture ends here
        loss.backward()
        opt.step()
        return loss

    compiled = adcuda.compile(step)
    x, y = _batches(1, (8, 20), 5)[0]
    with pytest.warns(UserWarning, match=r"item\(\) reads a tensor's value on the host at .*test_compile.py:\d+"):
        compiled(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            compiled(x, y)  # eager from now on, silently
    assert len(seen) == 4 and seen[0] > seen[-1]
    assert not compiled.programs


def test_fullgraph_raises_naming_the_op_and_the_line():
    def show(x):
        y = x * 2
        if bool(y.sum() > 0):  # a Python branch on a value
            return y
        return -y

    compiled = adcuda.compile(show, fullgraph=True)
    with pytest.raises(CaptureError, match=r"fullgraph=True.*__bool__.*test_compile.py:\d+"):
        compiled(adcuda.ones(3))


def test_printing_a_tensor_ends_the_capture():
    def shout(x):
        y = x + 1
        print(y)
        return y

    with pytest.raises(CaptureError, match="reads a tensor's value"):
        adcuda.compile(shout, fullgraph=True)(adcuda.ones(2))


def test_the_program_prints_its_primitives_buffers_and_peak_memory():
    a, b = adcuda.randn(8, 8, requires_grad=True), adcuda.randn(8, 8, requires_grad=True)

    @adcuda.compile
    def tiny(x):
        loss = ((x @ a).relu() * b).sum()
        loss.backward()
        return loss

    x = adcuda.randn(8, 8)
    tiny(x)
    text = str(tiny.programs[0])
    for word in ("matmul", "unary('relu'", "accumulate into leaf", "preallocated", "peak memory"):
        assert word in text
    grads = a.grad.numpy().copy()
    a.grad = b.grad = None
    tiny(x)
    assert np.array_equal(a.grad.numpy(), grads)


def test_the_cache_limit_is_reported_once():
    @adcuda.compile
    def double(x):
        return x * 2

    with pytest.warns(UserWarning, match="cache size limit"):
        for n in range(1, adcuda.capture.CACHE_SIZE_LIMIT + 3):
            assert double(adcuda.ones(n)).numpy().tolist() == [2.0] * n


def test_dynamic_shapes_are_refused_clearly():
    with pytest.raises(CaptureError, match="dynamic=True"):
        adcuda.compile(lambda x: x, dynamic=True)


def test_each_replay_is_one_profiler_range():
    from adcuda.profiler import profile

    w = adcuda.randn(4, 4)

    @adcuda.compile
    def f(x):
        return (x @ w).relu().sum()

    x = adcuda.randn(4, 4)
    with profile() as prof:
        for _ in range(3):
            f(x)  # the profiler's hooks are part of the signature: captured under it, then replayed
    events = prof.events()
    replays = [
        e for e in events if e.name == "adcuda.compile replay: test_each_replay_is_one_profiler_range.<locals>.f"
    ]
    assert len(replays) == 2
    assert [e.name for e in events if e.kind == "op"] == ["matmul", "relu", "sum"]  # the capture ran them eagerly
    for replay in replays:  # each replay's primitives are ranges inside its range, in order
        inside = [e for e in events if e.kind == "user" and replay.start_ns < e.start_ns and e.end_ns <= replay.end_ns]
        assert [e.name for e in inside] == ["matmul", "unary.relu", "reduce.sum"]
        assert replay.self_ns < replay.end_ns - replay.start_ns  # the primitives' time is theirs, not the range's


def test_other_threads_are_not_recorded():
    import threading

    stop = threading.Event()

    def busy():
        t = adcuda.ones(3)
        while not stop.is_set():
            t = t + 1

    worker = threading.Thread(target=busy)
    worker.start()
    try:

        @adcuda.compile
        def f(x):
            return x * 3

        x = adcuda.ones(5)
        for _ in range(4):
            assert f(x).numpy().tolist() == [3.0] * 5
    finally:
        stop.set()
        worker.join()
    assert sum(1 for line in f.programs[0].lines if "binary" in line) == 1


@pytest.mark.filterwarnings("ignore:GradScaler")
def test_branching_on_a_host_steps_result_ends_the_capture():
    model = _mlp()
    opt = adcuda.optim.SGD(model.parameters(), lr=0.1)
    sched = adcuda.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    scaler = GradScaler("cpu")

    def step(x, y):
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        if scaler.step(opt):  # a replay would not run this test again: the capture must end here
            sched.step()
        scaler.update()

    x, y = _batches(1, (8, 20), 5)[0]
    compiled = adcuda.compile(step, fullgraph=True)
    with pytest.raises(CaptureError, match=r"uses the result of the host step GradScaler.step at .*test_compile.py"):
        compiled(x, y)


def test_switching_to_eval_mode_is_seen_not_replayed_stale():
    adcuda.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5))

    @adcuda.compile
    def forward(x):
        with adcuda.no_grad():
            return model(x)

    x = adcuda.ones(4, 6)
    forward(x)
    forward(x)
    model.eval()  # no dropout now: the program captured in train mode must not replay
    with adcuda.no_grad():
        assert np.array_equal(forward(x).numpy(), model(x).numpy())
        assert np.array_equal(forward(x).numpy(), model(x).numpy())


def test_a_forward_hook_ends_the_capture():
    model = nn.Linear(3, 3)
    model.register_forward_hook(lambda module, args, output: None)
    with pytest.raises(CaptureError, match="forward hook on a Linear"):
        adcuda.compile(lambda x: model(x).sum(), fullgraph=True)(adcuda.ones(2, 3))


def test_gradients_accumulated_over_calls_without_zero_grad():
    def make():
        model = _mlp()

        def step(x, y):
            loss = F.cross_entropy(model(x), y) / 4
            loss.backward()  # .grad is set on the first call and added to on the later ones
            return loss

        return model, step

    batches = _batches(4, (8, 20), 5)
    eager_model, eager_step = make()
    model, step = make()
    compiled = adcuda.compile(step)
    for i in range(8):
        assert _bytes(compiled(*batches[i % 4])) == _bytes(eager_step(*batches[i % 4]))
        if i == 3:
            for m in (eager_model, model):
                for p in m.parameters():
                    p.grad = None
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert p.grad.numpy().tobytes() == q.grad.numpy().tobytes()


def test_inputs_written_in_place_and_structured_results():
    @adcuda.compile
    def f(inputs):
        inputs["x"].mul_(2)
        return {"sum": inputs["x"].sum(), "pair": (inputs["x"] + 1, None)}

    for value in (1.0, 2.0, 3.0):
        x = adcuda.full((3,), value)
        out = f({"x": x})
        assert x.numpy().tolist() == [2 * value] * 3
        assert out["sum"].item() == 6 * value
        assert out["pair"][0].numpy().tolist() == [2 * value + 1] * 3 and out["pair"][1] is None
    assert f.programs[0].replays == 2


def test_results_of_earlier_replays_are_not_overwritten():
    @adcuda.compile
    def f(x):
        return (x * 2).relu() + 1

    results = [f(adcuda.full((4,), float(i))) for i in range(4)]
    assert [r.numpy()[0] for r in results] == [1.0, 3.0, 5.0, 7.0]


def test_an_autocast_region_around_the_call_is_part_of_the_signature():
    w = adcuda.randn(4, 4)

    @adcuda.compile
    def f(x):
        return x @ w

    x = adcuda.randn(2, 4)
    assert f(x).dtype == adcuda.float32
    with adcuda.autocast("cpu", dtype=adcuda.float16):
        assert f(x).dtype == f(x).dtype == adcuda.float16
    assert f(x).dtype == adcuda.float32
    assert len(f.programs) == 2


def test_a_tensor_made_from_python_data_is_fresh_on_every_replay():
    @adcuda.compile
    def f(x):
        t = adcuda.tensor([1.0, 2.0])
        t.add_(x)  # written in place: the next replay must start from [1, 2] again
        return t

    x = adcuda.ones(2)
    assert [f(x).numpy().tolist() for _ in range(4)] == [[2.0, 3.0]] * 4


def test_value_checks_still_run_on_replay():
    model = _mlp()

    @adcuda.compile
    def loss_of(x, y):
        with adcuda.no_grad():
            return F.cross_entropy(model(x), y)

    x, y = _batches(1, (8, 20), 5)[0]
    loss_of(x, y)
    loss_of(x, y)
    bad = adcuda.tensor(np.full(8, 7))  # class 7 of 5: the check is a host step, run on every replay
    with pytest.raises(adcuda.IndexOutOfRangeError, match="target 7 is out of bounds"):
        loss_of(x, bad)
    assert loss_of.programs[0].replays == 2


def test_random_factories_draw_fresh_numbers_like_eager():
    def noisy(x):
        return x + adcuda.randn(3) * adcuda.rand(3)

    compiled = adcuda.compile(noisy)
    x = adcuda.zeros(3)
    adcuda.manual_seed(5)
    eager = [noisy(x).numpy().tolist() for _ in range(4)]
    adcuda.manual_seed(5)
    got = [compiled(x).numpy().tolist() for _ in range(4)]
    assert got == eager and got[1] != got[2]
    assert compiled.programs[0].replays == 3


def test_train_compile_gives_the_eager_run_bit_for_bit(tmp_path, monkeypatch):
    from adcuda.train import TASKS
    from adcuda.train.loop import TrainConfig, train

    made = []

    def compile_and_keep(fn):
        made.append(adcuda.capture.CompiledFunction(fn))
        return made[-1]

    monkeypatch.setattr(adcuda.capture, "compile", compile_and_keep)
    runs, captured = {}, {}
    for compiled in (False, True, None):  # None, the default: compiled on the CPU
        out = tmp_path / str(compiled)
        config = TrainConfig(task="digits", out=str(out), epochs=1, batch_size=256, quiet=True, compile=compiled)
        before = len(made)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # the step must be captured, not fall back
            train(config, TASKS["digits"])
        captured[compiled] = len(made) - before
        runs[compiled] = {k: v.numpy().tobytes() for k, v in adcuda.load(str(out / "checkpoint.pt"))["model"].items()}
    assert runs[True] == runs[False] == runs[None]
    assert captured == {False: 0, True: 1, None: 1}
    # 1258 training images in batches of 256: four full batches and one of 234, a program each, the
    # optimizer and schedule steps in it (a float32 run's scaler always steps)
    assert sorted(p.replays for p in made[0].programs) == [0, 3]
    assert "host step Adam.step (replayed by its _step_with_scratch" in str(made[0].programs[0])


def test_the_train_command_compiles_by_default_and_opts_out_with_no_compile():
    from adcuda.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["train"]).compile is None
    assert parser.parse_args(["train", "--compile"]).compile is True
    assert parser.parse_args(["train", "--no-compile"]).compile is False


def test_returning_a_python_value_is_refused():
    with pytest.raises(CaptureError, match="returns a float"):
        adcuda.compile(lambda x: 1.5, fullgraph=True)(adcuda.ones(1))
    with pytest.warns(UserWarning, match="returns a float"):
        assert adcuda.compile(lambda x: 1.5)(adcuda.ones(1)) == 1.5


def test_attention_dropout_draws_fresh_masks_forward_and_backward():
    rng = np.random.default_rng(0)
    q, k, v = (adcuda.tensor(rng.standard_normal((2, 5, 8)).astype(np.float32), requires_grad=True) for _ in range(3))

    def step():
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
        out.sum().backward()
        return out.detach()

    compiled = adcuda.compile(step)
    results = {}
    for name, fn in (("eager", step), ("compiled", compiled)):
        adcuda.manual_seed(3)
        for t in (q, k, v):
            t.grad = None
        outs = [fn().numpy().tobytes() for _ in range(4)]
        results[name] = outs, [t.grad.numpy().tobytes() for t in (q, k, v)]
    assert results["compiled"] == results["eager"]
    assert len(set(results["compiled"][0])) == 4  # a new mask on every call
    assert compiled.programs[0].replays == 3


def test_a_boolean_mask_read_ends_the_capture():
    with pytest.raises(CaptureError, match="boolean mask"):
        adcuda.compile(lambda x: x[x > 0].sum(), fullgraph=True)(adcuda.randn(6))


def test_classifier_step_with_closure_targets_is_captured():
    """cross_entropy's class-target check is a host step that reads the targets on the host (on the
    CPU, to_numpy gives the targets' own array back): that read must not mark the targets as made
    inside a host step, so the step captures, and its replay still checks the targets."""
    adcuda.manual_seed(0)
    model = adcuda.nn.Sequential(adcuda.nn.Linear(8, 8), adcuda.nn.ReLU(), adcuda.nn.Linear(8, 4))
    opt = adcuda.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = adcuda.from_numpy(rng.standard_normal((16, 8)).astype(np.float32))
    y = adcuda.from_numpy(rng.integers(0, 4, 16))

    def step():
        opt.zero_grad()
        loss = adcuda.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = adcuda.compile(step, fullgraph=True)
    losses = [compiled().item() for _ in range(3)]
    assert losses[0] > losses[1] > losses[2]
    y.copy_(adcuda.from_numpy(np.full(16, 9)))
    with pytest.raises(adcuda.errors.IndexOutOfRangeError):
        compiled()
