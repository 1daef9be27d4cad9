"""Write docs/api.md, the API reference, from the installed adcuda itself, so it cannot drift.

    python scripts/gen_api_reference.py            # rewrite docs/api.md
    python scripts/gen_api_reference.py --check    # exit 1 if docs/api.md differs from what it would write

Run it from outside the source tree or with an editable install (the source folder has no compiled
adcuda._C otherwise). tests/test_docs.py fails while the committed docs/api.md differs from its output.

Two parts: the ops (every operation on tensors, with the forms it comes in: ``adcuda.<name>``,
``Tensor.<name>``, in-place ``Tensor.<name>_``, ``adcuda.nn.functional.<name>``), then every public
namespace (functions, classes with their own public members, errors, constants). Everything is
read from the live package: names, signatures, and the first line of each docstring.
"""

import argparse
import dataclasses
import importlib
import inspect
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "docs", "api.md")

# The public namespaces, in the order a PyTorch user meets them, with what each is for.
NAMESPACES = [
    ("adcuda", "tensors, dtypes, factories, random numbers, grad modes, saving"),
    ("adcuda.autograd", "gradients: backward, grad, custom Functions, gradcheck, anomaly detection"),
    ("adcuda.linalg", "vector and matrix norms, products, cross products and diagonals"),
    ("adcuda.testing", "assert_close, for tests"),
    ("adcuda.special", "PyTorch's torch.special names: gammaln, psi, polygamma, erfinv, ..."),
    ("adcuda.distributions", "probability distributions, kl_divergence (docs/distributions.md)"),
    ("adcuda.distributions.constraints", "what values a parameter or a sample may take"),
    ("adcuda.distributions.transforms", "invertible maps with their log-Jacobians"),
    ("adcuda.sparse", "sparse COO tensors' products and sums (docs/sparse.md)"),
    ("adcuda.nn", "modules and layers"),
    ("adcuda.nn.functional", "the layers as functions"),
    ("adcuda.nn.init", "parameter initialisation"),
    ("adcuda.nn.utils", "gradient clipping, parameters as one vector"),
    ("adcuda.nn.utils.rnn", "padding variable-length sequences into a batch"),
    ("adcuda.nn.parallel", "data-parallel training"),
    ("adcuda.optim", "optimizers"),
    ("adcuda.optim.lr_scheduler", "learning-rate schedules"),
    ("adcuda.amp", "mixed precision: autocast and loss scaling"),
    ("adcuda.cuda", "devices, streams, memory"),
    ("adcuda.utils.data", "datasets and data loading"),
    ("adcuda.distributed", "process groups and collectives"),
    ("adcuda.profiler", "the per-op profiler and NVTX ranges"),
    ("adcuda.export", "exporting: a model's eval forward traced as a graph of primitives, and written as C99"),
    ("adcuda.onnx", "ONNX export"),
]


@dataclasses.dataclass
class OpEntry:
    name: str
    signature: str
    forms: list  # e.g. ["adcuda.add", "Tensor.add", "Tensor.add_", "F.relu"]
    doc: str
    differentiable: bool = None  # None: not known from the namespaces (the op registry knows)


def first_line(obj):
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ").strip()


def signature_of(obj):
    """The call signature, with its type annotations written as in the source (``dtype: DType | None``, not
    ``dtype: typing.Optional[adcuda.dtypes.dtype]``). adcuda keeps most annotations as the source's text
    (``from __future__ import annotations``), which reads the same on every Python version; the few
    evaluated ones lose their module prefixes to read alike."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    parameters = [p.replace(annotation=_compact(p.annotation)) for p in signature.parameters.values()]
    # a class's signature is its __init__'s, whose "-> None" says nothing about calling the class
    returns = inspect.Signature.empty if inspect.isclass(obj) else _compact(signature.return_annotation)
    return str(signature.replace(parameters=parameters, return_annotation=returns))


class _AnnotationText:
    """An annotation that ``inspect`` prints as its bare text (a str would print quoted)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _compact(annotation):
    if annotation is inspect.Parameter.empty:
        return annotation
    if isinstance(annotation, type):
        return _AnnotationText(annotation.__qualname__)
    text = annotation if isinstance(annotation, str) else repr(annotation).replace("NoneType", "None")
    return _AnnotationText(re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])", "", text))  # builtins.bool -> bool


def public_names(module):
    """``__all__``, or else the public names of what the module (or a module inside it) defines, with
    those it provides on first use (``_LOADED_ON_FIRST_USE``, read by its module ``__getattr__``, which
    ``vars()`` cannot see; submodules among them are namespaces of their own, see NAMESPACES)."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n for n, value in vars(module).items() if not n.startswith("_") and _defined_in(value, module.__name__)
        ]
        lazy = getattr(module, "_LOADED_ON_FIRST_USE", {})
        names += [n for n, (_, attribute) in lazy.items() if attribute is not None and hasattr(module, n)]
    return sorted(set(names))


def _defined_in(value, module_name):
    if inspect.ismodule(value):
        return False  # the namespaces are listed by NAMESPACES; which submodules are attributes depends on imports
    defined = getattr(value, "__module__", None) if (inspect.isclass(value) or callable(value)) else None
    if defined is None:  # a constant: kept when it is one of adcuda's objects or a plain value
        return belongs_to_adcuda(type(value)) or isinstance(value, (bool, int, float, str))
    return defined == module_name or defined.startswith(module_name + ".")


def belongs_to_adcuda(obj):
    """Objects defined by adcuda (not a re-exported ``math`` or ``warnings``)."""
    module = getattr(obj, "__module__", None) or ""
    return module == "adcuda" or module.startswith("adcuda.")


# ---------------------------------------------------------------------------------------------- ops
def op_entries():
    """Every op, from the public namespaces: the functions of ``adcuda`` defined in ``adcuda.ops``,
    with their method, in-place and ``nn.functional`` forms where those exist."""
    import adcuda
    import adcuda.nn.functional as F

    entries = []
    for name in public_names(adcuda):
        fn = getattr(adcuda, name)
        defined_in = getattr(fn, "__module__", "") or ""
        if not callable(fn) or inspect.isclass(fn) or not defined_in.startswith("adcuda.ops"):
            continue
        forms = [f"adcuda.{name}"]
        if callable(getattr(adcuda.Tensor, name, None)):
            forms.append(f"Tensor.{name}")
        if callable(getattr(adcuda.Tensor, name + "_", None)):
            forms.append(f"Tensor.{name}_")
        if name in getattr(F, "__all__", ()):
            forms.append(f"F.{name}")
        entries.append(OpEntry(name, signature_of(fn), forms, first_line(fn)))
    return entries


def render_ops(entries):
    known = any(e.differentiable is not None for e in entries)
    lines = [
        "## Ops",
        "",
        "Every operation on tensors and the forms it comes in (`F` is `adcuda.nn.functional`). They take "
        "PyTorch's arguments (`dim`, `keepdim`, ...), broadcast where PyTorch broadcasts and follow its "
        "type promotion; differentiable ones record themselves for `backward()`.",
        "",
    ]
    if known:
        lines += ["| op | signature | forms | differentiable | what it does |", "|---|---|---|---|---|"]
    else:
        lines += ["| op | signature | forms | what it does |", "|---|---|---|---|"]
    for e in entries:
        row = f"| `{e.name}` | `{_cell(e.signature)}` | {', '.join(f'`{f}`' for f in e.forms)} |"
        if known:
            row += " yes |" if e.differentiable else " no |"
        lines.append(row + f" {_cell(e.doc)} |")
    return lines


def _cell(text):
    return text.replace("|", "\\|")


# ---------------------------------------------------------------------------------------------- namespaces
def members_of(cls):
    """A class's own public methods and properties, and those of its private bases, which the
    reference does not list (other inherited ones are listed with their class)."""
    own = {}
    for klass in reversed(cls.__mro__):
        if klass is cls or (klass.__name__.startswith("_") and belongs_to_adcuda(klass)):
            own.update(vars(klass))
    out = []
    for name, value in sorted(own.items()):
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            out.append((name, "", first_line(value)))
        elif isinstance(value, (staticmethod, classmethod)):
            out.append((name, signature_of(value.__func__), first_line(value.__func__)))
        elif inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethoddescriptor(value):
            out.append((name, signature_of(value), first_line(value)))
    return out


def constant_text(value):
    if isinstance(value, (bool, int, float, str)) or type(value).__module__ == "adcuda.dtypes":
        return repr(value)
    return f"a `{type(value).__module__}.{type(value).__qualname__}`"


def render_namespace(module_name, purpose, op_names):
    module = importlib.import_module(module_name)
    functions, classes, errors, constants = [], [], [], []
    for name in public_names(module):
        value = getattr(module, name)
        if inspect.ismodule(value):
            continue
        if inspect.isclass(value):
            if belongs_to_adcuda(value):
                (errors if issubclass(value, BaseException) else classes).append((name, value))
        elif callable(value):
            if belongs_to_adcuda(value) and not (module_name == "adcuda" and name in op_names):
                functions.append((name, value))
        elif belongs_to_adcuda(type(value)) or isinstance(value, (bool, int, float, str)):
            constants.append((name, value))
    lines = [f"## `{module_name}`", "", purpose[0].upper() + purpose[1:] + ".", ""]
    if module_name == "adcuda":
        lines += ["The ops are listed above; here is the rest.", ""]
    if functions:
        lines += ["### Functions", ""]
        lines += [
            f"- `{name}{signature_of(fn)}`" + (f": {first_line(fn)}" if first_line(fn) else "")
            for name, fn in functions
        ]
        lines.append("")
    for name, cls in classes:
        lines += [f"### `{module_name}.{name}{signature_of(cls)}`", ""]
        if first_line(cls):
            lines += [first_line(cls), ""]
        members = members_of(cls)
        if members:
            lines += [f"- `{member}{signature}`" + (f": {doc}" if doc else "") for member, signature, doc in members]
            lines.append("")
    if errors:
        lines += ["### Errors", ""]
        lines += [
            f"- `{name}` ({', '.join(base.__name__ for base in cls.__bases__)})"
            + (f": {first_line(cls)}" if first_line(cls) else "")
            for name, cls in errors
        ]
        lines.append("")
    if constants:
        lines += ["### Constants", ""]
        lines += [f"- `{name}`: {constant_text(value)}" for name, value in constants]
        lines.append("")
    return lines


def render():
    import adcuda

    ops = op_entries()
    lines = [
        "# adcuda API reference",
        "",
        "<!-- Generated by scripts/gen_api_reference.py from the package itself; do not edit by hand. -->",
        "",
        "What exists in adcuda, read from the package: every op and the forms it comes in, then each "
        "public namespace. Names, signatures and meanings are PyTorch's wherever PyTorch has the thing; "
        "[differences.md](differences.md) lists where adcuda differs.",
        "",
    ]
    lines += ["Namespaces: " + ", ".join(f"[`{name}`](#{name.replace('.', '')})" for name, _ in NAMESPACES), ""]
    lines += render_ops(ops) + [""]
    op_names = {e.name for e in ops}
    for name, purpose in NAMESPACES:
        lines += render_namespace(name, purpose, op_names)
    del adcuda
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/api.md instead of writing it")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(OUTPUT, encoding="utf-8") as f:
            current = f.read()
        if current != text:
            print("docs/api.md is out of date: run python scripts/gen_api_reference.py", file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUTPUT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
