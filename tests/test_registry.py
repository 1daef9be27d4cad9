"""The op registry and the dispatch point: every op declared once, enumerable, with the forms the
declaration names; every call through one entry point, where hooks see ops and primitives and cost
nothing while none is attached."""

import importlib.util
import inspect
import pathlib
import sys

import numpy as np
import pytest

import adcuda
import adcuda._op_functions as op_functions_module
import adcuda.nn._functional_ops as functional_module
import adcuda.nn.functional as F
from adcuda.ops import dispatch, registry

OPS_DIR = pathlib.Path(registry.__file__).parent


def test_every_op_is_declared_once_with_a_one_line_doc_in_a_family_module():
    ops = registry.all_ops()
    names = [d.name for d in ops]
    assert len(names) == len(set(names)) and len(ops) > 150
    for d in ops:
        assert d.doc and "\n" not in d.doc, d.name
        assert (OPS_DIR / f"{d.family}.py").exists(), (d.name, d.family)
        assert registry.get(d.name) is d and d.entry.op is d
        assert d.differentiable == bool(d.grads) or d.composite, d.name


def test_forms_are_generated_from_the_declarations():
    for d in registry.all_ops():
        for name in d.forms["function"]:
            assert getattr(adcuda, name) is d.entry, name
        for name in d.forms["method"]:
            assert getattr(adcuda.Tensor, name) is (d.method_adapter or d.entry), name
        for name in d.forms["inplace"]:
            assert getattr(adcuda.Tensor, name) is d.inplace_entry, name
        for name in d.forms["functional"]:
            assert hasattr(F, name), name
    assert adcuda.Tensor.__mul__ is adcuda.mul and adcuda.multiply is adcuda.mul
    assert adcuda.Tensor.add_.op is registry.get("add") and adcuda.Tensor.__iadd__ is adcuda.Tensor.add_
    assert isinstance(vars(adcuda.Tensor)["T"], property)
    assert set(F.__all__) >= {"relu", "relu_", "linear", "cross_entropy", "layer_norm", "pad", "softmax"}


def test_the_registry_says_what_the_api_reference_needs():
    mul = registry.get("mul")
    assert list(mul.signature.parameters) == ["input", "other"]
    assert mul.family == "elementwise" and mul.differentiable and mul.node == "MulBackward0"
    assert mul.forms["operators"] == ["__mul__", "__rmul__", "__imul__"]
    assert mul.forms["inplace"] == ["mul_", "multiply_"]  # an alias's in-place form too
    gelu = registry.get("gelu")
    assert gelu.fused is not None and [f.targets for f in gelu.grads] == [("input",)]
    assert registry.get("eq").differentiable is False and registry.get("square").composite


def test_declarations_are_checked_when_they_are_made():
    with pytest.raises(ValueError, match="declared twice"):
        registry.op("mul", doc="again")(lambda input, other: input)
    with pytest.raises(ValueError, match="reads 'weight'"):
        registry.op("test_reads_unknown", doc="x.", node="XBackward0", grads={"input": lambda grad, weight: grad})(
            lambda input: input
        )
    with pytest.raises(ValueError, match="one line"):
        registry.op("test_two_lines", doc="a\nb")(lambda input: input)


class Recorder:
    """A dispatch hook that notes the ops and primitives it sees, as graph capture will."""

    def __init__(self):
        self.ops, self.primitives = [], []

    def around_op(self, name, op, call, args, kwargs):
        self.ops.append(name)
        return call(*args, **kwargs)

    def wrap_backend(self, backend):
        recorder = self

        class Seen:
            def __getattr__(self, primitive):
                fn = getattr(backend, primitive)

                def call(*args, **kwargs):
                    recorder.primitives.append(primitive)
                    return fn(*args, **kwargs)

                return call

        return Seen()


def test_hooks_see_every_op_and_primitive_and_detach_to_nothing():
    x, y = adcuda.ones(3, requires_grad=True), adcuda.ones(3)
    recorder = Recorder()
    assert not dispatch._slow
    dispatch.add_hook(recorder)
    try:
        assert dispatch._slow
        z = (x * y + 1.0).relu().sum()
        z.backward()
    finally:
        dispatch.remove_hook(recorder)
    assert not dispatch._slow and sys.modules["adcuda.tensor"]._primitive_observer is None
    assert recorder.ops[:4] == ["mul", "add", "relu", "sum"]
    assert "expand" in recorder.ops  # ops called by backward formulas pass the same point
    assert recorder.primitives[:4] == ["binary", "binary", "unary", "reduce"]
    assert "unary_backward" in recorder.primitives  # the fused backward primitive, through the hook
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 1.0])
    before = len(recorder.ops)
    (x * y).sum()
    assert len(recorder.ops) == before


def test_autocast_is_a_hook_attached_only_inside_a_region():
    assert not dispatch._hooks
    with adcuda.autocast("cpu"):
        assert len(dispatch._hooks) == 1
        out = adcuda.ones(2, 3) @ adcuda.ones(3)
        assert out.dtype is adcuda.float16
    assert not dispatch._hooks


def test_recording_saves_what_the_formulas_read():
    a = adcuda.ones(3, requires_grad=True)
    b = adcuda.ones(3)
    # only the operand the needed gradient reads is kept: b, for a's gradient
    node = (a * b).grad_fn
    assert [t is b for t in node.saved_tensors] == [True]
    # a reduction keeps the input's shape, not the input
    assert (a.sum()).grad_fn._saved is None
    # gradients come back to each input's shape and dtype (broadcasting and promotion undone)
    w = adcuda.ones(1, 3, dtype=adcuda.float16, requires_grad=True)
    ((w * adcuda.ones(4, 3)).sum()).backward()
    assert w.grad.shape == (1, 3) and w.grad.dtype is adcuda.float16
    np.testing.assert_array_equal(w.grad.numpy(), [[4.0, 4.0, 4.0]])


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_anomaly_mode_names_the_op_on_the_gpu():
    """Issue 14: with detect_anomaly() on, the backward of sqrt of a CUDA tensor with a negative entry
    raised TypeError from the CUDA reduce primitive (it was given axes=None); it names sqrt."""
    x = adcuda.tensor([4.0, -1.0], device="cuda", requires_grad=True)
    with adcuda.autograd.detect_anomaly():
        y = x.sqrt().sum()
        with pytest.raises(adcuda.AutogradError, match="SqrtBackward0"):
            y.backward()


def _callable_with_one_argument(definition):
    params = list(definition.signature.parameters.values())
    return (
        bool(params)
        and params[0].annotation in ("Tensor", "Sequence[Tensor]")
        and all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[1:])
    )


@pytest.mark.parametrize(
    "definition", [d for d in registry.all_ops() if _callable_with_one_argument(d)], ids=lambda d: d.name
)
def test_a_list_where_a_tensor_belongs_is_named(definition):
    """A list given for a tensor raised a bare AttributeError from inside the forward (``adcuda.sum([1,
    2])``: "'list' object has no attribute '_device'"); every op names itself and the input instead."""
    with pytest.raises(Exception, match=rf"^{definition.name}\b") as raised:
        definition.entry([[1.0, 2.0]])
    assert isinstance(raised.value, adcuda.AdcudaError | TypeError | ValueError)
    assert not isinstance(raised.value, AttributeError)


def test_a_number_in_a_tensor_sequence_is_named():
    with pytest.raises(adcuda.DTypeError, match=r"stack: tensors\[1\] must be a Tensor, got float"):
        adcuda.stack([adcuda.ones(2), 1.0])


def test_numpy_aliases_reach_every_form_of_a_dim_op():
    """``axis``/``keepdims`` are declared once, at the dispatch point, for every op with ``dim``/``keepdim``:
    its function, method and in-place forms take them (a required dim too), and its signature says so."""
    import inspect

    x = adcuda.arange(6.0).reshape(2, 3)
    index = adcuda.tensor([[0], [2]])
    assert adcuda.gather(x, axis=1, index=index).tolist() == [[0.0], [5.0]]
    assert x.sum(axis=1, keepdims=True).shape == (2, 1)
    y = adcuda.zeros(2, 3)
    y.index_add_(axis=1, index=adcuda.tensor([0]), source=adcuda.ones(2, 1))
    assert y.sum().item() == 2.0
    for form in (adcuda.gather, adcuda.Tensor.sum, adcuda.Tensor.index_add_):
        assert "axis" in inspect.signature(form).parameters
    assert "keepdims" in inspect.signature(adcuda.amax).parameters
    with pytest.raises(adcuda.DTypeError, match="gather: missing required argument 'dim'"):
        adcuda.gather(x, index=index)


def test_varargs_of_sizes_or_dims_also_take_their_name():
    import inspect

    x = adcuda.zeros(2, 1, 1)
    assert x.squeeze(1, 2).shape == (2,) and x.squeeze((1, 2)).shape == (2,) and x.squeeze(dim=1).shape == (2, 1)
    assert x.reshape(shape=(1, 2)).shape == (1, 2) and x.broadcast_to(3, 2, 1, 1).shape == (3, 2, 1, 1)
    assert adcuda.ones(2, 3).count_nonzero(0, 1).item() == 6
    parameters = inspect.signature(adcuda.Tensor.reshape).parameters
    assert parameters["shape_args"].kind is inspect.Parameter.VAR_POSITIONAL
    assert parameters["shape"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(adcuda.DTypeError, match="reshape: got shape both"):
        x.reshape(2, shape=(2,))


# ----------------------------------------------------------------------------------------------
# the function forms by name (scripts/gen_op_functions.py)
def test_the_generated_function_modules_are_current():
    # the checkout's files, not the installed package's (CI tests an installed copy)
    root = pathlib.Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("gen_op_functions", root / "scripts" / "gen_op_functions.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for relative, text in generator.modules().items():
        committed = (root / relative).read_text(encoding="utf-8")
        assert committed == text, f"{relative} is stale: run python scripts/gen_op_functions.py"


def test_function_forms_are_the_op_entries_defined_by_name():
    assert sorted(op_functions_module.__all__) == sorted(registry.functions())
    for name, entry in registry.functions().items():
        assert getattr(adcuda, name) is entry, name  # no wrapper: a call costs what the entry costs
    assert sorted(F.__all__) == sorted(registry.functional_forms())
    assert F.gelu is registry.get("gelu").entry
    # F.relu_ names its tensor input, as PyTorch's (Tensor.relu_'s is self): a def over the in-place entry
    assert list(inspect.signature(F.relu_).parameters) == ["input"] and F.relu_(adcuda.tensor([-1.0])).tolist() == [0.0]
    assert F.relu.__code__.co_filename == functional_module.__file__  # a def an editor finds
    x = adcuda.tensor([-1.0, 2.0])
    assert F.leaky_relu(x, 0.5).tolist() == [-0.5, 2.0] and x.tolist() == [-1.0, 2.0]
    assert F.leaky_relu(x, 0.5, True) is x and x.tolist() == [-0.5, 2.0]  # inplace by position, as PyTorch
    assert F.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]


def test_a_forward_parameter_may_share_no_name_with_its_generated_entry(monkeypatch):
    """An entry's own locals start with an underscore, so a forward parameter named ``mask`` (the
    recording's bit mask was once a bare ``mask``) reaches the forward and the gradient as it was given;
    a parameter named as something the entry calls (``forward``) is refused at declaration."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the test ops leave no trace
    from adcuda.ops.elementwise import mul

    masked = registry.op(
        "test_masked_scale",
        doc="input times mask.",
        node="TestMaskedScaleBackward0",
        method=False,
        grads={"input": lambda grad, mask: grad * mask},
    )(lambda input, mask: mul(input, mask))
    x = adcuda.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = adcuda.tensor([0.0, 1.0, 2.0])
    y = masked(x, m)
    y.sum().backward()
    assert y.tolist() == [0.0, 2.0, 6.0] and x.grad.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match=r"\['forward'\] are names its generated entry uses"):
        registry.op("test_shadowing", doc="x.", method=False)(lambda input, forward: input)
