"""Numerical gradient checks: ``gradcheck`` (first order) and ``gradgradcheck`` (second order).

Central differences in float64 against the analytical Jacobian, column by column (one backward per
output element, one pair of forwards per input element), like PyTorch's slow mode.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np  # host-side Jacobian bookkeeping for the check itself

from .. import dtypes
from ..errors import AutogradError
from ..random import default_generator
from ..tensor import Tensor, primitives_on
from .api import grad as autograd_grad

if TYPE_CHECKING:
    from ..types import Callable, Sequence


class GradcheckError(AutogradError):
    pass


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _differentiable(inputs):
    return [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]


def _outputs(fn, inputs):
    return [o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _numerical_jacobian(fn, inputs, idx, eps):
    # grad mode stays on: the function gradgradcheck checks calls autograd.grad itself
    base = [o.detach().numpy().astype(np.float64).ravel() for o in _outputs(fn, inputs)]
    jac = []
    for k in idx:
        t = inputs[k]
        data = t.detach().numpy()
        if not data.flags.writeable:
            raise GradcheckError("gradcheck: inputs must be writeable (not expanded views)")
        cols = [np.zeros((t.numel(), b.size)) for b in base]
        flat_index = list(np.ndindex(*data.shape)) if data.ndim else [()]
        for j, pos in enumerate(flat_index):
            orig = data[pos].item()
            data[pos] = orig + eps
            plus = [o.detach().numpy().astype(np.float64).ravel() for o in _outputs(fn, inputs)]
            data[pos] = orig - eps
            minus = [o.detach().numpy().astype(np.float64).ravel() for o in _outputs(fn, inputs)]
            data[pos] = orig
            for c, p, m in zip(cols, plus, minus):
                c[j] = (p - m) / (2 * eps)
        jac.append(cols)
    return jac


def _filled(shape, value, dtype, device):
    return Tensor._make(primitives_on(device).full(shape, value, dtype), device)


def _randn(shape, dtype, device):
    n = 1
    for s in shape:
        n *= s
    seed, offset = default_generator.next_offset(n)
    return Tensor._make(primitives_on(device).randn(shape, dtype, seed, offset), device)


def _analytical_jacobian(fn, inputs, idx):
    outs = _outputs(fn, inputs)
    jac = [[np.zeros((inputs[k].numel(), o.numel())) for o in outs] for k in idx]
    for oi, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for j in range(o.numel()):
            seed = _filled(tuple(o.shape), 0, o.dtype, o.device)
            seed.view(-1)[j] = 1.0 if o.numel() else 0.0
            grads = autograd_grad([o], [inputs[k] for k in idx], [seed], retain_graph=True, allow_unused=True)
            for col, g in zip(jac, grads):
                if g is not None:
                    col[oi][:, j] = g.detach().numpy().astype(np.float64).ravel()
    return jac


def gradcheck(
    func: Callable[..., Tensor | Sequence[Tensor]],
    inputs: Tensor | Sequence[Tensor],
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
) -> bool:
    """True if analytical and numerical Jacobians of ``func`` at ``inputs`` agree."""
    inputs = _as_tuple(inputs)
    idx = _differentiable(inputs)
    if not idx:
        raise GradcheckError("gradcheck: at least one input tensor must require grad")
    for k in idx:
        if inputs[k].dtype is not dtypes.float64:
            warnings.warn(
                f"gradcheck: input {k} is {inputs[k].dtype}, not float64; the check may fail from rounding alone",
                stacklevel=2,
            )
    numerical = _numerical_jacobian(func, inputs, idx, eps)
    analytical = _analytical_jacobian(func, inputs, idx)
    for k, num_cols, ana_cols in zip(idx, numerical, analytical):
        for oi, (n, a) in enumerate(zip(num_cols, ana_cols)):
            if not np.allclose(a, n, rtol=rtol, atol=atol, equal_nan=False):
                if raise_exception:
                    worst = np.unravel_index(np.argmax(np.abs(a - n)), a.shape) if a.size else ()
                    raise GradcheckError(
                        f"Jacobian mismatch for output {oi} with respect to input {k},\n"
                        f"numerical:{n}\nanalytical:{a}\n"
                        f"largest difference at {worst}: {np.max(np.abs(a - n)) if a.size else 0}"
                    )
                return False
    return True


def gradgradcheck(
    func: Callable[..., Tensor | Sequence[Tensor]],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor] | None = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    gen_non_contig_grad_outputs: bool = False,
) -> bool:
    """gradcheck of the function ``inputs, grad_outputs -> d(outputs)/d(inputs) . grad_outputs``."""
    inputs = _as_tuple(inputs)
    idx = _differentiable(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(_randn(tuple(o.shape), dtypes.float64, o.device).requires_grad_() for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def first_derivative(*args):
        xs, gs = args[:n_in], args[n_in:]
        ys = _outputs(func, xs)
        grads = autograd_grad(ys, [xs[k] for k in idx], list(gs), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        first_derivative,
        tuple(inputs) + tuple(grad_outputs),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
