"""Type hints on the public API: every op's forward and every public function, method and property of
the namespaces users type against is annotated (each parameter and the return), and every annotation is
a valid type expression on this Python (most are kept as source text by ``from __future__ import
annotations``, so nothing else would notice a typo or a name that is not imported for type checkers).

The names adcuda makes at import time (``adcuda.<op>``, ``adcuda.nn.functional.<op>``, Tensor's op methods)
are declared for type checkers by stubs generated from the registry (scripts/gen_type_stubs.py), checked
here to be current. The seam's annotations are checked by tests/test_backend_seam.py. A user script
type-checks against the package with mypy where mypy is installed
(``test_a_typed_training_script_type_checks``), with real types for the generated names.
"""

import ast
import builtins
import enum
import importlib
import inspect
import os
import pathlib
import shutil
import subprocess
import sys
import types
import typing

import pytest
from helpers import load_module

import adcuda
import adcuda.types
from adcuda.ops import all_ops

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The namespaces whose public functions are checked, and the classes whose public members are.
NAMESPACES = (
    "adcuda",
    "adcuda.autograd",
    "adcuda.nn.functional",
    "adcuda.optim",
    "adcuda.optim.lr_scheduler",
    "adcuda.amp",
    "adcuda.cuda",
    "adcuda.utils.data",
    "adcuda.distributed",
    "adcuda.profiler",
)

# Namespaces whose every class (its constructor and public methods) is checked too.
CLASS_NAMESPACES = (
    "adcuda.nn",
    "adcuda.optim.lr_scheduler",
    "adcuda.utils.data",
    "adcuda.distributed",
    "adcuda.profiler",
)


def _classes():
    import adcuda.amp
    import adcuda.nn
    import adcuda.optim

    return (
        adcuda.Tensor,
        adcuda.Size,
        adcuda.Generator,
        adcuda.device,
        adcuda.dtype,
        adcuda.finfo,
        adcuda.iinfo,
        adcuda.no_grad,
        adcuda.enable_grad,
        adcuda.set_grad_enabled,
        adcuda.inference_mode,
        adcuda.autograd.Function,
        adcuda.autograd.FunctionCtx,
        adcuda.autograd.Node,
        adcuda.autograd.detect_anomaly,
        adcuda.nn.Module,
        adcuda.optim.Optimizer,
        adcuda.optim.SGD,
        adcuda.optim.Adam,
        adcuda.optim.AdamW,
        adcuda.amp.GradScaler,
        adcuda.amp.autocast,
        adcuda.cuda.Stream,
        adcuda.cuda.ExternalStream,
        adcuda.cuda.Event,
        adcuda.cuda.StreamContext,
        adcuda.cuda.device,
        *_classes_of(CLASS_NAMESPACES),
    )


def _classes_of(module_names):
    """The public classes adcuda defines in these namespaces (nn's layers, the schedulers, ...), each once."""
    seen = {}
    for module_name in module_names:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            value = getattr(module, name)
            if (
                inspect.isclass(value)
                and (value.__module__ or "").startswith("adcuda")
                and not issubclass(value, (BaseException, enum.Enum))  # an Enum's members are its values
            ):
                seen.setdefault(value, None)
    return tuple(seen)


def _missing(fn, skip_first):
    """The names of ``fn``'s unannotated parameters (``->`` for the return)."""
    signature = inspect.signature(fn)
    missing = [
        p.name
        for i, p in enumerate(signature.parameters.values())
        if p.annotation is p.empty and not (skip_first and i == 0)
    ]
    if signature.return_annotation is signature.empty and fn.__name__ != "__init__":
        missing.append("->")
    return missing


# adcuda.types' names: its own and those it imports from adcuda's modules on first use (it is a leaf)
_TYPES = {name: getattr(adcuda.types, name) for name in adcuda.types.__all__}


def _invalid(fn):
    """``fn``'s annotations that do not evaluate to a type expression, evaluated as a type checker reads
    them: in its module's namespace, with adcuda.types' names for those imported only for type checkers."""
    target = inspect.unwrap(fn)
    module = sys.modules[target.__module__]
    namespace = {**vars(builtins), "builtins": builtins, **_TYPES, **vars(module)}
    signature = inspect.signature(fn)
    annotations = [(p.name, p.annotation) for p in signature.parameters.values()]
    annotations.append(("->", signature.return_annotation))
    invalid = []
    for name, annotation in annotations:
        if annotation is inspect.Parameter.empty:
            continue
        try:
            value = eval(annotation, namespace) if isinstance(annotation, str) else annotation
        except Exception as e:  # noqa: BLE001 (any failure to evaluate is the finding)
            invalid.append(f"{name}: {annotation!r} ({type(e).__name__}: {e})")
            continue
        if not _is_type_expression(value):
            invalid.append(f"{name}: {annotation!r} is a {type(value).__name__}, not a type")
    return invalid


def _is_type_expression(value):
    return (
        value is None
        or isinstance(value, (type, types.UnionType, types.GenericAlias, typing.TypeVar))
        or type(value).__module__ in ("typing", "collections.abc")
    )


def _public_functions():
    for module_name in NAMESPACES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            value = getattr(module, name)
            if callable(value) and not inspect.isclass(value) and (value.__module__ or "").startswith("adcuda"):
                yield f"{module_name}.{name}", value
    yield "adcuda.save", adcuda.save
    yield "adcuda.load", adcuda.load


# nn's layers: what a user calls, the constructor and forward (Module's own members are checked in full)
_LAYER_MEMBERS = ("__init__", "forward")


def _public_members():
    import adcuda.nn

    for cls in _classes():
        layer = issubclass(cls, adcuda.nn.Module) and cls is not adcuda.nn.Module
        for name, value in vars(cls).items():
            if name.startswith("__") and name not in ("__init__", "__new__", "__enter__", "__exit__", "__call__"):
                continue
            if name.startswith("_") and not name.startswith("__"):
                continue
            if layer and name not in _LAYER_MEMBERS:
                continue
            if isinstance(value, property):
                yield f"{cls.__name__}.{name}", value.fget, True
            elif isinstance(value, (staticmethod, classmethod)):
                # __new__ is a static method that takes the class
                yield f"{cls.__name__}.{name}", value.__func__, isinstance(value, classmethod) or name == "__new__"
            elif inspect.isfunction(value):
                yield f"{cls.__name__}.{name}", value, True


def test_every_op_forward_is_annotated():
    problems = [f"{d.name} ({d.family}): {_missing(d.forward, False)}" for d in all_ops() if _missing(d.forward, False)]
    assert not problems, "op forwards with unannotated parameters or return:\n" + "\n".join(problems)


def test_every_op_annotation_is_a_valid_type():
    problems = [f"{d.name} ({d.family}): {bad}" for d in all_ops() for bad in _invalid(d.forward)]
    assert not problems, "\n".join(problems)


def test_public_functions_are_annotated():
    problems = [f"{name}: {_missing(fn, False)}" for name, fn in _public_functions() if _missing(fn, False)]
    assert not problems, "public functions with unannotated parameters or return:\n" + "\n".join(problems)


def test_public_methods_and_properties_are_annotated():
    problems = [
        f"{name}: {_missing(fn, skip_first)}" for name, fn, skip_first in _public_members() if _missing(fn, skip_first)
    ]
    assert not problems, "public methods with unannotated parameters or return:\n" + "\n".join(problems)


def test_public_annotations_are_valid_types():
    functions = [(name, fn) for name, fn in _public_functions()]
    functions += [(name, fn) for name, fn, _ in _public_members()]
    problems = [f"{name}: {bad}" for name, fn in functions for bad in _invalid(fn)]
    assert not problems, "\n".join(problems)


def test_adcuda_types_is_a_leaf():
    # run by itself (not as a submodule, which would import the package first), it imports nothing of
    # adcuda, so the modules that define its names can import it without a circle; its adcuda names come
    # on first use, each the class it stands for
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('types_alone', {str(ROOT / 'adcuda' / 'types.py')!r}); "
        "spec.loader.exec_module(importlib.util.module_from_spec(spec)); "
        "print(sorted(m for m in sys.modules if m.startswith('adcuda')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
    assert adcuda.types.Tensor is adcuda.Tensor and adcuda.types.DType is adcuda.dtype
    assert adcuda.types.Node is adcuda.autograd.Node and adcuda.types.Size is adcuda.Size
    assert adcuda.types.Number == bool | int | float
    assert set(adcuda.types.__all__) <= set(dir(adcuda.types))
    with pytest.raises(AttributeError):
        adcuda.types.NoSuchName  # noqa: B018


def test_a_type_checker_sees_no_import_circle():
    # the circles of scripts/import_cycles.py: module-level imports, TYPE_CHECKING ones and those inside
    # functions included, a stub (.pyi) standing for its module. Tensor's generated stub of attached members
    # names nothing of tensor.py or autograd (TensorOps is generic over Tensor and grad_fn's GradFn)
    cycles = load_module("import_cycles", ROOT / "scripts" / "import_cycles.py")
    edges = cycles.graph(deferred=True)
    assert {"adcuda.types", "adcuda.tensor", "adcuda._tensor_ops", "adcuda.autograd.graph"} <= set(edges)
    assert "adcuda.tensor" in edges["adcuda.autograd.graph"] and "adcuda._tensor_ops" in edges["adcuda.tensor"]
    assert cycles.components(edges) == []
    # the checker finds a circle where there is one: a stub importing the module that imports it
    assert cycles.components({**edges, "adcuda._tensor_ops": {"adcuda.tensor"}}) == [
        ["adcuda._tensor_ops", "adcuda.tensor"]
    ]


def test_tensor_binds_the_type_parameters_of_its_generated_base():
    # TensorOps' type parameters stand for tensor.py's names, in the generator's order; tensor.py binds them
    # to those names (a type checker would read a mismatch as the wrong return types, silently)
    generator = _load_stub_generator()
    source = (ROOT / "adcuda" / "tensor.py").read_text(encoding="utf-8")
    binding = ", ".join(f'"{name}"' for name in generator.TENSOR_PY_NAMES)
    assert f"_AttachedAtImport = TensorOps[{binding}]" in source
    stub = (ROOT / "adcuda" / "_tensor_ops.pyi").read_text(encoding="utf-8")
    assert f"class TensorOps(Generic[{', '.join(f'_{name}' for name in generator.TENSOR_PY_NAMES)}]):" in stub
    assert "import adcuda.tensor" not in stub and "from adcuda.tensor" not in stub


def test_the_entry_points_show_the_annotations():
    # what help() and inspect show: the forward's signature through the dispatching entry point
    assert str(inspect.signature(adcuda.add)) == (
        "(input: 'Tensor | Number', other: 'Tensor | Number', *, alpha: 'Number' = 1) -> 'Tensor'"
    )
    assert str(inspect.signature(adcuda.Tensor.add)) == str(inspect.signature(adcuda.add))
    assert str(inspect.signature(adcuda.Tensor.add_)) == (
        "(self: 'Tensor', other: 'Tensor | Number', *, alpha: 'Number' = 1) -> 'Tensor'"
    )
    import adcuda.nn.functional as F

    assert str(inspect.signature(F.relu)) == "(input: 'Tensor', inplace: 'bool' = False) -> 'Tensor'"
    # layer_norm's forward also returns its saved statistics; the entry returns the output alone
    assert inspect.signature(F.layer_norm).return_annotation == "Tensor"


def _load_stub_generator():
    return load_module("gen_type_stubs", ROOT / "scripts" / "gen_type_stubs.py")


def test_the_type_stubs_are_what_the_generator_writes():
    # adcuda.<op>, F.<op> and Tensor's generated methods are declared for type checkers by committed
    # stubs; a registry change that is not followed by `python scripts/gen_type_stubs.py` fails here
    for path, text in _load_stub_generator().stubs().items():
        committed = (ROOT / path).read_text(encoding="utf-8")
        assert committed == text, f"{path} is stale: run python scripts/gen_type_stubs.py"


def _declared(path, cls=None):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    body = tree.body if cls is None else next(n for n in tree.body if isinstance(n, ast.ClassDef)).body
    return {n.name for n in body if isinstance(n, ast.FunctionDef)}


def test_the_stubs_declare_every_generated_name():
    import adcuda.nn.functional as F

    functions = {name for name, fn in adcuda._ops.functions().items() if vars(adcuda).get(name) is fn}
    assert functions and functions <= _declared("adcuda/_op_functions.pyi")
    assert set(F.__all__) <= _declared("adcuda/nn/_functional_ops.pyi")
    tensor_forms = {
        name
        for d in all_ops()
        for form in ("method", "property", "inplace", "operators")
        for name in d.forms[form]
        if form != "method" or d.method_adapter is not None or getattr(adcuda.Tensor, name) is d.entry
    }
    assert tensor_forms <= _declared("adcuda/_tensor_ops.pyi", cls="TensorOps")
    # and what autograd attaches
    assert {"backward", "requires_grad", "grad_fn", "register_hook", "detach"} <= _declared(
        "adcuda/_tensor_ops.pyi", cls="TensorOps"
    )


def test_the_wheel_ships_the_py_typed_marker():
    # PEP 561: type checkers read a package's inline annotations only when it has this marker; every file
    # under adcuda/ goes into the wheel (pyproject.toml: wheel.packages)
    assert (ROOT / "adcuda" / "py.typed").is_file()
    assert 'wheel.packages = ["adcuda"]' in (ROOT / "pyproject.toml").read_text()


TYPED_SCRIPT = """
import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda import Tensor

class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Tensor:
        h: Tensor = self.fc(x * 2 + 1)
        return h.relu() - h.mean(dim=0)

def train(steps: int) -> float:
    model = Net()
    optimizer = adcuda.optim.SGD(model.parameters(), lr=0.1)
    scaler = adcuda.amp.GradScaler(enabled=False)
    x = adcuda.randn(8, 4)
    y = adcuda.randint(0, 3, (8,))
    loss = adcuda.zeros(())
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    adcuda.save(model.state_dict(), "model.pt")
    return loss.item()

def generated_names() -> int:
    # the registry's functions, F's and Tensor's op methods, with their real signatures
    x = adcuda.randn(3, 4, requires_grad=True)
    y: Tensor = adcuda.relu(x)
    adcuda.relu(x).sum().backward()
    z = F.gelu(y) + x.exp().mean(dim=0) * 2
    w = F.softmax(z, dim=-1).matmul(adcuda.ones(4))
    grad: Tensor | None = x.grad
    flag: bool = x.requires_grad and grad is not None
    v = x.view(12).reshape(3, 4).T.contiguous().add_(1.0, alpha=2).clamp(min=0.0)
    return w.numel() + int(flag) + adcuda.cat([v, v], dim=0).unsqueeze(0).ndim

def overloaded_forms(x: Tensor) -> Tensor:
    # the forms an op declares with @overload: max(dim) is a pair, max() and nonzero() a Tensor
    values, indices = x.max(dim=0)
    largest: Tensor = x.max()
    rows: Tensor = x.nonzero()
    picked: Tensor = adcuda.where(x > 0, x, 0.0)
    return values + indices + largest + rows.sum() + picked
"""

BROKEN_SCRIPT = """
import adcuda
import adcuda.nn.functional as F
from adcuda import Tensor

def scaled(x: Tensor, steps: int) -> str:
    return (x * steps).numel()

def generated(x: Tensor) -> None:
    named: str = adcuda.relu(x)
    F.relu(x, inplace="yes")
    x.reshape(2, 2).no_such_method()
"""

# what the broken script's lines must give: each a finding only real types make
BROKEN_FINDINGS = (
    'bad.py:7: error: Incompatible return value type (got "int", expected "str")',
    'bad.py:10: error: Incompatible types in assignment (expression has type "Tensor", variable has type "str")',
    'bad.py:11: error: Argument "inplace" to "relu" has incompatible type "str"; expected "bool"',
    'bad.py:12: error: "Tensor" has no attribute "no_such_method"',
)


@pytest.mark.skipif(
    shutil.which("mypy") is None and not os.path.exists(os.path.join(os.path.dirname(sys.executable), "mypy")),
    reason="mypy is not installed",
)
def test_a_typed_training_script_type_checks(tmp_path):
    mypy = shutil.which("mypy") or os.path.join(os.path.dirname(sys.executable), "mypy")
    (tmp_path / "good.py").write_text(TYPED_SCRIPT)
    (tmp_path / "bad.py").write_text(BROKEN_SCRIPT)

    # one run for both (mypy's start dominates): the typed script passes, the wrong one fails
    result = subprocess.run(
        [
            mypy,
            "--no-incremental",
            "--follow-imports=silent",
            "--ignore-missing-imports",
            "--python-version",
            "3.10",
            "good.py",
            "bad.py",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert "good.py" not in result.stdout, result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    for finding in BROKEN_FINDINGS:
        assert finding in result.stdout, result.stdout + result.stderr
