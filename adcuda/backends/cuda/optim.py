"""The CUDA backend's optimizer and loss-scaling primitives over adcuda's multi-tensor kernels
(kernels/optim.cu): ``sgd_step_`` and ``adam_step_`` update every tensor of a call in one launch
(more only past a few dozen tensors), with optional fp32 master weights for fp16/bf16 parameters
(or fp16/bf16 working copies of fp32 parameters, written in the same pass) and, for Adam, a gradient
multiplier read on the device (clip_grad_norm_'s coefficient);
``unscale_and_check_`` and ``update_scale_`` keep the loss scale and the found-inf flag on the device;
``global_norm`` reduces every gradient of ``clip_grad_norm_`` in the same multi-tensor launches.
Signatures and math are the CPU backend's (adcuda/backends/cpu/optim.py).
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError
from ._common import Arrays, BackendArray, cast, dense, is_device_array, is_floating, scalar_type

__all__ = ["sgd_step_", "adam_step_", "unscale_and_check_", "update_scale_", "global_norm"]


def _state(op, arrays):
    """Arrays the step writes in place: they must be floating point and contiguous (the kernel walks
    them flat)."""
    arrays = list(arrays or ())
    for a in arrays:
        if not is_floating(a):
            raise DTypeError(f"{op}: optimizer tensors must be floating point, got {a.dtype.name}")
        if not a.is_contiguous():
            raise ValueError(
                f"{op}: a parameter or state array of shape {tuple(a.shape)} is not contiguous; "
                "the CUDA optimizer kernels update contiguous arrays in place"
            )
    return arrays


def _grads(op, grads):
    grads = list(grads)
    for g in grads:
        if not is_floating(g):
            raise DTypeError(f"{op}: gradients must be floating point, got {g.dtype.name}")
    return [dense(g) for g in grads]


def sgd_step_(
    params: Arrays,
    grads: Arrays,
    bufs: Arrays | None,
    lr: float,
    momentum: float,
    dampening: float,
    nesterov: bool,
    weight_decay: float,
    first_step: bool,
    masters: Arrays | None = None,
) -> None:
    """PyTorch's SGD in place over many tensors (see the CPU backend)."""
    op = "sgd_step_"
    _native._C.sgd_step_(
        _state(op, params),
        _grads(op, grads),
        _state(op, bufs),
        _state(op, masters),
        float(lr),
        float(momentum),
        float(dampening),
        bool(nesterov),
        float(weight_decay),
        bool(first_step),
    )


def adam_step_(
    params: Arrays,
    grads: Arrays,
    exp_avgs: Arrays,
    exp_avg_sqs: Arrays,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    masters: Arrays | None,
    max_exp_avg_sqs: Arrays | None = None,
    grad_multiplier: BackendArray | None = None,
) -> None:
    """Adam / AdamW in place over many tensors at the 1-based ``step`` (see the CPU backend); the
    kernel reads ``grad_multiplier`` on the device (no host sync)."""
    op = "adam_step_"
    if grad_multiplier is not None:
        if grad_multiplier.size != 1 or grad_multiplier.dtype != scalar_type("float32"):
            raise ValueError(
                f"{op}: the gradient multiplier must be one float32 element, got {grad_multiplier.dtype.name}"
            )
        grad_multiplier = dense(grad_multiplier)
    _native._C.adam_step_(
        _state(op, params),
        _grads(op, grads),
        _state(op, exp_avgs),
        _state(op, exp_avg_sqs),
        _state(op, masters),
        _state(op, max_exp_avg_sqs),
        int(step),
        float(lr),
        float(beta1),
        float(beta2),
        float(eps),
        float(weight_decay),
        bool(decoupled),
        grad_multiplier,
    )


def unscale_and_check_(outs: Arrays, grads: Arrays, inv_scale: BackendArray | float) -> BackendArray:
    """``outs[i] = grads[i] * inv_scale`` for many tensors -> 0-d float32 found-inf flag, on the device.
    ``inv_scale`` is a one-element device array (kept there: no host sync) or a Python number."""
    op = "unscale_and_check_"
    C = _native._C
    grads = _grads(op, grads)
    outs = _state(op, outs)
    if is_device_array(inv_scale):
        scale_array, scale_value = dense(cast(inv_scale, scalar_type("float32"))), 0.0
        device = inv_scale.device
    else:
        scale_array, scale_value = None, float(inv_scale)
        device = grads[0].device if grads else C.cuda_current_device()
    if grads:
        device = grads[0].device
    return C.unscale_and_check_(outs, grads, scale_array, scale_value, device)


def update_scale_(
    scale: BackendArray,
    growth_tracker: BackendArray,
    found_inf: BackendArray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
    min_scale: float,
    max_scale: float,
) -> None:
    """PyTorch's dynamic loss-scale update in place on the 0-d float32 ``scale`` and int32
    ``growth_tracker`` (see the CPU backend); nothing reaches the host."""
    _native._C.update_scale_(
        scale,
        growth_tracker,
        cast(found_inf, scalar_type("float32")),
        float(growth_factor),
        float(backoff_factor),
        int(growth_interval),
        float(min_scale),
        float(max_scale),
    )


def global_norm(arrays: Arrays, norm_type: float) -> BackendArray:
    """The ``norm_type``-norm of all ``arrays`` together -> 0-d float32 (float64 if any array is), left
    on the device (see the CPU backend); deterministic: partials per chunk, combined in order."""
    op = "global_norm"
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"{op}: norm_type must be positive or inf, got {norm_type}")
    arrays = list(arrays)
    for a in arrays:
        if not is_floating(a):
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype.name}")
    C = _native._C
    device = arrays[0].device if arrays else C.cuda_current_device()
    return C.global_norm([dense(a) for a in arrays], norm_type, device)
