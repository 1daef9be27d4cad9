"""Multi-tensor ops, with PyTorch's names (``torch._foreach_*``, ``torch._fused_*``, ``torch._amp_*``)
where PyTorch has the op: one call updates many tensors. The fused ones (optimizer steps, loss
scaling, the global norm) run one multi-tensor backend primitive (on a GPU, one kernel launch covers
dozens of tensors); the elementwise ones call their primitive once per tensor.

The library layer (optimizers, ``GradScaler``, gradient clipping, ``DistributedDataParallel``,
``zero_grad``) updates tensors only through these and the other public ops. Like every in-place op,
each one here owns the checks of what it writes (one device, matching shapes, floating point where
the kernel needs it, no write through an expanded view) and bumps the version counter of every
tensor it writes, so a value saved for backward and then overwritten is still caught.

None of them records a graph: with grad mode on, a tensor that requires grad raises (optimizers and
clipping run under ``adcuda.no_grad()``, as in PyTorch).

| op | primitive | writes |
|---|---|---|
| ``_foreach_add_(self, other, alpha=1)`` | ``binary("add")`` per tensor | ``self`` |
| ``_foreach_mul_(self, other)`` | ``binary("mul")`` per tensor | ``self`` |
| ``_foreach_clamp_(self, min, max)`` (adcuda) | ``clamp`` per tensor | ``self`` |
| ``_foreach_zero_(self)`` | ``copy_`` per tensor | ``self`` |
| ``_foreach_copy_(self, src)`` | ``copy_`` per tensor | ``self`` |
| ``_global_norm(tensors, norm_type)`` (adcuda) | ``global_norm`` | nothing: a new 0-d tensor |
| ``_fused_sgd_(...)`` | ``sgd_step_`` | params, momentum buffers, masters |
| ``_fused_adam_(...)`` / ``_fused_adamw_(...)`` | ``adam_step_`` (one call per step count) | params, moments, masters |
| ``_amp_foreach_non_finite_check_and_unscale_(...)`` | ``unscale_and_check_`` | grads (or ``out``), ``found_inf`` |
| ``_amp_update_scale_(...)`` | ``update_scale_`` | scale, growth tracker |
| ``_foreach_version(tensors)`` (adcuda) | none | nothing: each tensor's in-place write count |
| ``_foreach_increment_version_(tensors)`` (adcuda) | none | the version counters of memory written elsewhere |

Beside them, ``_make_subclass`` (PyTorch's ``Tensor._make_subclass``, not exported as ``adcuda.*``) makes
the alias ``nn.Parameter`` is built on.

Each is a registry op (``adcuda._foreach_add_`` and the rest; no Tensor method): the dispatch point's
hooks see its calls, and its primitive calls go through ``primitives``, so the profiler counts them
and graph capture will see them.
"""

import math
from collections.abc import Sequence

from .. import dtypes as dt
from ..autograd.grad_mode import is_grad_enabled
from ..backends.seam import Scratch
from ..device import CPU
from ..errors import AutogradError, DeviceError, DTypeError, ResultTypeError, ShapeError, fmt_shape
from ..tensor import Tensor, primitives, primitives_on, version_counter
from .common import broadcast_shapes, result_type, wrap
from .mutation import check_inplace_allowed
from .registry import op

Tensors = Sequence[Tensor]
Number = bool | int | float


# ----------------------------------------------------------------------------------------------
# what every op here checks
# backend array dtype object -> adcuda dtype: the checks below ask every tensor of a call for its dtype,
# and Tensor.dtype costs several times this lookup
_DTYPE_OF_ARRAY_DTYPE: dict[object, dt.dtype] = {}


def _dtype(t):
    key = t._data.dtype
    d = _DTYPE_OF_ARRAY_DTYPE.get(key)
    if d is None:
        d = _DTYPE_OF_ARRAY_DTYPE[key] = t.dtype
    return d


def _tensor_list(op, name, tensors):
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name}[{i}] must be a Tensor, got {type(t).__name__}")
    return tensors


def _one_device(op, tensors):
    """The device all ``tensors`` share (None for an empty list), or a DeviceError naming two."""
    device = None
    for t in tensors:
        if device is None:
            device = t._device
        elif t._device is not device and t._device != device:
            raise DeviceError(
                f"{op}: expected all tensors to be on the same device, but found at least two "
                f"devices, {device} and {t._device}"
            )
    return device


def _refuse_autograd(op, *lists):
    """These ops record no graph: under grad mode a tensor that requires grad would silently lose its
    history (or a leaf its gradient), so it is an error, as a fused optimizer op is in PyTorch."""
    if not is_grad_enabled():
        return
    for tensors in lists:
        for t in tensors:
            if t is not None and t.requires_grad:
                raise AutogradError(
                    f"{op}: a tensor of shape {fmt_shape(t.shape)} requires grad, and {op} does not "
                    "record a graph; call it under adcuda.no_grad()"
                )


def _check_writable(op, tensors):
    """No element of a tensor written in place may alias another (an expanded view); only a view can."""
    for t in tensors:
        if t._base is not None and not t.is_contiguous():
            check_inplace_allowed(t, op)


def _writing_backend(op, written, operands):
    """The backend of the one device of ``operands`` (``written`` among them; None where there are
    none), after refusing autograd and checking that ``written`` may be written in place."""
    device = _one_device(op, operands)
    _refuse_autograd(op, operands)
    _check_writable(op, written)
    return None if device is None else primitives_on(device)


def _check_shapes(op, like_name, like, named_lists):
    """Each ``(name, tensors)`` of ``named_lists`` holds, at every index, a tensor of ``like``'s shape."""
    for i, reference in enumerate(like):
        shape = reference._data.shape
        for name, tensors in named_lists:
            if tensors[i]._data.shape != shape:
                raise ShapeError(
                    f"{op}: {name}[{i}] has shape {fmt_shape(tensors[i].shape)} but {like_name}[{i}] "
                    f"has shape {fmt_shape(shape)}"
                )


def _check_floating(op, name, tensors):
    """Every tensor floating point (the fused kernels update floating point state only); asked once per
    distinct array dtype."""
    for key in {t._data.dtype for t in tensors}:
        known = _DTYPE_OF_ARRAY_DTYPE.get(key)
        if known is None or not known.is_floating_point:
            for i, t in enumerate(tensors):
                if not _dtype(t).is_floating_point:
                    raise DTypeError(f"{op}: {name}[{i}] must be floating point, got {t.dtype}")


def _same_length(op, first_name, first, **others):
    for name, tensors in others.items():
        if tensors is not None and len(tensors) != len(first):
            raise ShapeError(f"{op}: {name} has {len(tensors)} tensors but {first_name} has {len(first)}")


def _bump(*lists):
    for tensors in lists:
        if tensors:
            for t in tensors:
                version_counter(t).value += 1


def _category(operand):
    return _dtype(operand).category if isinstance(operand, Tensor) else dt.scalar_category(operand)


def _check_result_category(op, t, other, other_category):
    """An in-place result must fit the tensor it is written into (PyTorch's rule: no float into int);
    the result's category is the higher of the two operands' (type promotion never lowers it)."""
    if other_category > _dtype(t).category:
        raise ResultTypeError(
            f"{op}: result type {result_type(t, other)} can't be cast to the desired output type {t.dtype}"
        )


def _check_broadcast(op, t, other):
    """``other`` (a tensor operand of an in-place op on ``t``) must broadcast to ``t``'s shape."""
    if other._data.shape != t._data.shape and broadcast_shapes(op, t.shape, other.shape) != tuple(t.shape):
        raise ShapeError(
            f"{op}: output with shape {fmt_shape(t.shape)} doesn't match the broadcast shape "
            f"{fmt_shape(broadcast_shapes(op, t.shape, other.shape))}"
        )


# ----------------------------------------------------------------------------------------------
# elementwise over many tensors
def _foreach_binary_(op, primitive, tensors, other, alpha=1):
    tensors = _tensor_list(op, "self", tensors)
    if isinstance(other, (list, tuple)):
        others = _tensor_list(op, "other", other)
        _same_length(op, "self", tensors, other=others)
    elif isinstance(other, Tensor):
        if other.numel() != 1:
            raise ShapeError(f"{op}: a tensor operand must have one element, got shape {fmt_shape(other.shape)}")
        others = None
    elif isinstance(other, (bool, int, float)):
        others = None
    else:
        raise TypeError(
            f"{op}: other must be a number, a one-element Tensor or a list of Tensors, got {type(other).__name__}"
        )
    operands = tensors + (others or []) + ([other] if isinstance(other, Tensor) else [])
    bk = _writing_backend(op, tensors, operands)
    if bk is None:
        return
    shared_category = _category(other) if others is None else None
    for i, t in enumerate(tensors):
        b = others[i] if others is not None else other
        _check_result_category(op, t, b, _category(b) if others is not None else shared_category)
        if isinstance(b, Tensor):
            if others is not None:
                _check_broadcast(op, t, b)
            elif b._data.ndim > t._data.ndim:  # one element broadcasts to any shape with as many dims
                raise ShapeError(
                    f"{op}: output with shape {fmt_shape(t.shape)} doesn't match the broadcast shape "
                    f"{fmt_shape(broadcast_shapes(op, t.shape, b.shape))}"
                )
            b = b._data if alpha == 1 else bk.binary("mul", b._data, alpha, t.dtype)
        elif alpha != 1:
            b = b * alpha
        bk.copy_(t._data, bk.binary(primitive, t._data, b, t.dtype))
    _bump(tensors)


@op(
    "_foreach_add_",
    method=False,
    doc="self[i] += alpha * other[i] (or other, a number or one-element tensor), in place.",
)
def _foreach_add_(self: Tensors, other: Number | Tensor | Tensors, *, alpha: Number = 1) -> None:
    """``self[i] += alpha * other[i]`` for a list ``other``, ``self[i] += alpha * other`` for a number or
    a one-element tensor; in place, each result in ``self[i]``'s dtype."""
    _foreach_binary_("_foreach_add_", "add", self, other, alpha)


@op("_foreach_mul_", doc="self[i] *= other[i] (or other, a number or one-element tensor), in place.", method=False)
def _foreach_mul_(self: Tensors, other: Number | Tensor | Tensors) -> None:
    """``self[i] *= other[i]`` for a list ``other``, ``self[i] *= other`` for a number or a one-element
    tensor (which stays on the device: no host read); in place, computed as the ``mul`` op computes."""
    _foreach_binary_("_foreach_mul_", "mul", self, other)


@op("_foreach_clamp_", doc="self[i].clamp_(min, max) for every tensor, in one call.", method=False)
def _foreach_clamp_(self: Tensors, min: Number | None = None, max: Number | None = None) -> None:
    """``self[i].clamp_(min, max)`` for every tensor, in one call (adcuda's; PyTorch spells it as
    ``_foreach_clamp_min_`` followed by ``_foreach_clamp_max_``, two passes over the memory)."""
    op = "_foreach_clamp_"
    tensors = _tensor_list(op, "self", self)
    if min is None and max is None:
        raise ValueError(f"{op}: at least one of min and max must be given")
    bk = _writing_backend(op, tensors, tensors)
    if bk is None:
        return
    for t in tensors:
        bk.copy_(t._data, bk.clamp(t._data, min, max))
    _bump(tensors)


@op("_foreach_zero_", doc="self[i].zero_() for every tensor.", method=False)
def _foreach_zero_(self: Tensors) -> None:
    """``self[i].zero_()`` for every tensor."""
    op = "_foreach_zero_"
    tensors = _tensor_list(op, "self", self)
    _refuse_autograd(op, tensors)
    _check_writable(op, tensors)
    for t in tensors:
        primitives(t).copy_(t._data, 0)
    _bump(tensors)


def zero_grads(parameters, set_to_none=True):
    """What ``Module.zero_grad`` and ``Optimizer.zero_grad`` do (not an op: it calls one): drop each
    gradient of ``parameters`` (``set_to_none``, PyTorch's default: the next backward allocates fresh
    ones) or zero it in place, detached from any graph that produced it."""
    zeroed = []
    for p in parameters:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if p.grad.grad_fn is not None:
            p.grad.detach_()
        else:
            p.grad.requires_grad_(False)
        zeroed.append(p.grad)
    _foreach_zero_(zeroed)


def pre_hook_arguments(result, args, kwargs, owner, kind):
    """What a Module's forward pre-hook or an Optimizer's step pre-hook (``kind``) given both ``args``
    and ``kwargs`` leaves them as (not an op): its ``result`` None keeps them, else it must be the new
    pair (PyTorch's rule); ``owner`` names the module or optimizer in the error."""
    if result is None:
        return args, kwargs
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(
            f"{owner}: a {kind} pre-hook must return None or a tuple of (new_args, new_kwargs), "
            f"got {type(result).__name__}"
        )
    return result


@op("_foreach_copy_", doc="self[i].copy_(src[i]) for every pair.", method=False)
def _foreach_copy_(self: Tensors, src: Tensors, non_blocking: bool = False) -> None:
    """``self[i].copy_(src[i])`` for every pair: ``src[i]`` broadcast to ``self[i]``'s shape and cast to
    its dtype (moved to its device first if it lives elsewhere)."""
    op = "_foreach_copy_"
    tensors = _tensor_list(op, "self", self)
    sources = _tensor_list(op, "src", src)
    _same_length(op, "self", tensors, src=sources)
    _refuse_autograd(op, tensors, sources)
    _check_writable(op, tensors)
    for t, s in zip(tensors, sources):
        if s._device != t._device:
            s = s.to(t._device, non_blocking=non_blocking)
        bk = primitives(t)
        data = s._data
        if data.shape != t._data.shape:
            try:
                fits = broadcast_shapes(op, t.shape, s.shape) == tuple(t.shape)
            except ShapeError:
                fits = False
            if not fits:
                raise ShapeError(f"{op}: src of shape {fmt_shape(s.shape)} cannot be broadcast to {fmt_shape(t.shape)}")
            data = bk.expand(data, t._data.shape)
        bk.copy_(t._data, data)
    _bump(tensors)


@op("_foreach_version", doc="How many in-place writes each tensor (with its views) has had.", method=False)
def _foreach_version(tensors: Tensors) -> list[int]:
    """How many in-place writes each tensor (with its views) has had: PyTorch's ``Tensor._version``,
    read for many tensors at once (optimizers use it to notice writes from elsewhere)."""
    return [version_counter(t).value for t in _tensor_list("_foreach_version", "tensors", tensors)]


@op(
    "_foreach_increment_version_",
    method=False,
    doc="Record that these tensors' memory was written in place outside adcuda's ops.",
)
def _foreach_increment_version_(tensors: Tensors) -> None:
    """Record that something other than an adcuda op wrote these tensors' memory in place (a
    collective's transport, a kernel of another library reached through DLPack): PyTorch's
    ``torch.autograd.graph.increment_version`` for many tensors. A value saved for backward before
    the write then fails backward's version check, as after any in-place op."""
    _bump(_tensor_list("_foreach_increment_version_", "tensors", tensors))


@op(
    "_make_subclass",
    method=False,
    function=False,
    doc="A Tensor-subclass alias of data (its memory and version counter), outside any graph.",
)
def _make_subclass(cls: type, data: Tensor, require_grad: bool = False) -> Tensor:
    """A ``cls`` instance (a subclass of Tensor) sharing ``data``'s memory and version counter (so its
    in-place history), outside any graph: PyTorch's ``Tensor._make_subclass``, as ``nn.Parameter``
    uses it."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_subclass: cls must be a subclass of Tensor, got {cls!r}")
    if not isinstance(data, Tensor):
        raise TypeError(f"_make_subclass: data must be a Tensor, got {type(data).__name__}")
    alias = cls._make(data._data, data._device)
    alias._vc = version_counter(data)
    if require_grad:
        alias.requires_grad_(True)
    return alias


# ----------------------------------------------------------------------------------------------
# norms
@op("_global_norm", doc="The norm_type-norm of all elements of the tensors together, as one 0-d tensor.", method=False)
def _global_norm(tensors: Tensors, norm_type: float = 2.0) -> Tensor:
    """The ``norm_type``-norm (> 0, or inf) of all elements of ``tensors`` taken together, as one 0-d
    tensor on their device: float32, accumulated in float32 (float64 if any tensor is float64); a NaN
    anywhere gives NaN, an inf (and no NaN) inf. One multi-tensor reduction, no host read. An empty
    list gives a CPU zero."""
    op = "_global_norm"
    tensors = _tensor_list(op, "tensors", tensors)
    device = _one_device(op, tensors)
    _refuse_autograd(op, tensors)
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"{op}: norm_type must be positive or inf, got {norm_type}")
    _check_floating(op, "tensors", tensors)
    device = device or CPU
    return wrap(primitives_on(device).global_norm([t._data for t in tensors], norm_type), device)


# ----------------------------------------------------------------------------------------------
# optimizer steps
def _optional_list(op, name, tensors, params):
    """A per-parameter list that may be absent (None or empty): None, or one tensor per parameter."""
    if not tensors:
        return None
    tensors = _tensor_list(op, name, tensors)
    _same_length(op, "self", params, **{name: tensors})
    return tensors


def _step_operands(op, params, grads, state, masters):
    """Check one fused step's operands: ``state`` maps a name to the per-parameter state tensors the
    step writes (or None). Returns the device (None when there is nothing to step)."""
    _same_length(op, "self", params, grads=grads)
    named_state = [(name, tensors) for name, tensors in state.items() if tensors is not None]
    if masters:
        named_state.append(("master_params", masters))
    written = [params] + [tensors for _, tensors in named_state]
    device = _one_device(op, [t for tensors in written for t in tensors] + grads)
    _refuse_autograd(op, grads, *written)
    for tensors in written:
        _check_writable(op, tensors)
    _check_shapes(op, "self", params, [("grads", grads)] + named_state)
    for name, tensors in [("self", params), ("grads", grads)] + named_state:
        _check_floating(op, name, tensors)
    return device


def _grad_arrays(bk, grads, maximize):
    return [bk.unary("neg", g._data) for g in grads] if maximize else [g._data for g in grads]


def _arrays(tensors):
    return None if tensors is None else [t._data for t in tensors]


def _scratch_keyword(scratch, device):
    """The primitive's ``scratch`` keyword: only the CPU primitives take it (seam.CPU_REPLAY_KEYWORDS)."""
    return {"scratch": scratch} if scratch is not None and device is CPU else {}


@op("_fused_sgd_", doc="PyTorch's SGD step for many parameters in one call.", method=False)
def _fused_sgd_(
    self: Tensors,
    grads: Tensors,
    momentum_buffer_list: Tensors | None,
    *,
    weight_decay: float,
    momentum: float,
    lr: float,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    is_first_step: bool,
    master_params: Tensors | None = None,
    scratch: Scratch | None = None,
) -> None:
    """PyTorch's SGD step for many parameters in one call (``self``: the parameters). With
    ``momentum != 0``, ``momentum_buffer_list`` holds one buffer per parameter (empty otherwise); on
    ``is_first_step`` each buffer is set to its gradient instead of being decayed. ``maximize``
    ascends. Beyond PyTorch: ``master_params`` (float32 copies of float16/bfloat16 parameters, or None)
    are stepped instead of the parameters, which then receive the result in their own dtype;
    ``scratch`` (CPU only, None elsewhere) gives the primitive its temporaries (ignored on CUDA) (graph capture's replay
    passes the arrays it keeps; adcuda.backends.seam.Scratch)."""
    op = "_fused_sgd_"
    params = _tensor_list(op, "self", self)
    grads = _tensor_list(op, "grads", grads)
    bufs = _optional_list(op, "momentum_buffer_list", momentum_buffer_list, params) if momentum != 0 else None
    if momentum != 0 and bufs is None and params:
        raise ValueError(f"{op}: momentum={momentum} needs one momentum buffer per parameter")
    masters = _optional_list(op, "master_params", master_params, params)
    device = _step_operands(op, params, grads, {"momentum_buffer_list": bufs}, masters)
    if device is None:
        return
    bk = primitives_on(device)
    bk.sgd_step_(
        _arrays(params),
        _grad_arrays(bk, grads, maximize),
        _arrays(bufs),
        float(lr),
        float(momentum),
        float(dampening),
        bool(nesterov),
        float(weight_decay),
        bool(is_first_step),
        _arrays(masters),
        **_scratch_keyword(scratch, device),
    )
    _bump(params, bufs, masters)


def _fused_adam_forward(op, decoupled):
    """The forward of ``_fused_adam_`` (``decoupled=False``: PyTorch's Adam, L2 weight decay added to the
    gradient) or ``_fused_adamw_`` (``decoupled=True``: AdamW, the weights decay by ``lr * weight_decay``),
    which share PyTorch's signature and differ only there.

    ``state_steps`` are one-element tensors holding each parameter's 1-based step count, already
    incremented by the caller (``_foreach_add_(state_steps, 1)``), as in PyTorch; ``max_exp_avg_sqs``
    (empty unless ``amsgrad``) makes it AMSGrad. Beyond PyTorch: ``master_params`` and ``scratch`` as
    in ``_fused_sgd_`` (a float32 master with float32 gradients may have a float16/bfloat16 parameter:
    its working copy, written in the same pass); ``grad_multiplier``, a one-element float32 tensor on
    the parameters' device, scales every gradient first exactly as a
    ``_foreach_mul_(grads, grad_multiplier)`` before the step would on that device, read by the kernel on the
    device: ``clip_grad_norm_``'s coefficient applied inside the step (``Optimizer.clip_grad_norm_``);
    the gradients themselves are not written."""

    def forward(
        self: Tensors,
        grads: Tensors,
        exp_avgs: Tensors,
        exp_avg_sqs: Tensors,
        max_exp_avg_sqs: Tensors | None,
        state_steps: Tensors,
        *,
        lr: float,
        beta1: float,
        beta2: float,
        weight_decay: float,
        eps: float,
        amsgrad: bool,
        maximize: bool,
        master_params: Tensors | None = None,
        scratch: Scratch | None = None,
        grad_multiplier: Tensor | None = None,
    ) -> None:
        params = _tensor_list(op, "self", self)
        grads = _tensor_list(op, "grads", grads)
        exp_avgs = _tensor_list(op, "exp_avgs", exp_avgs)
        exp_avg_sqs = _tensor_list(op, "exp_avg_sqs", exp_avg_sqs)
        steps = _tensor_list(op, "state_steps", state_steps)
        _same_length(op, "self", params, exp_avgs=exp_avgs, exp_avg_sqs=exp_avg_sqs, state_steps=steps)
        maxes = _optional_list(op, "max_exp_avg_sqs", max_exp_avg_sqs, params) if amsgrad else None
        if amsgrad and maxes is None and params:
            raise ValueError(f"{op}: amsgrad=True needs one max_exp_avg_sqs tensor per parameter")
        masters = _optional_list(op, "master_params", master_params, params)
        device = _step_operands(
            op, params, grads, {"exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs, "max_exp_avg_sqs": maxes}, masters
        )
        if device is None:
            return
        multiplier = None
        if grad_multiplier is not None:
            _check_flag(op, "grad_multiplier", grad_multiplier, device, dt.float32)
            multiplier = grad_multiplier._data
        # the primitive steps tensors that share one step count: one call per distinct count (normally
        # one); the counts are CPU tensors (as PyTorch keeps them), so reading them is no device sync
        by_step: dict[int, list[int]] = {}
        for i, s in enumerate(steps):
            if s.numel() != 1:
                raise ShapeError(f"{op}: state_steps[{i}] must hold one number, got shape {fmt_shape(s.shape)}")
            by_step.setdefault(int(s.item()), []).append(i)
        bk = primitives_on(device)
        arrays = (
            _arrays(params),
            _grad_arrays(bk, grads, maximize),
            _arrays(exp_avgs),
            _arrays(exp_avg_sqs),
            _arrays(masters),
            _arrays(maxes),
        )
        for step, members in by_step.items():
            everything = len(members) == len(params)
            p, g, m, v, master, vmax = (a if a is None or everything else [a[i] for i in members] for a in arrays)
            bk.adam_step_(
                p,
                g,
                m,
                v,
                step,
                float(lr),
                float(beta1),
                float(beta2),
                float(eps),
                float(weight_decay),
                decoupled,
                master,
                vmax,
                multiplier,
                **_scratch_keyword(scratch, device),
            )
        _bump(params, exp_avgs, exp_avg_sqs, maxes, masters)

    return forward


_fused_adam_ = op("_fused_adam_", doc="PyTorch's Adam step for many parameters in one call.", method=False)(
    _fused_adam_forward("_fused_adam_", decoupled=False)
)
_fused_adamw_ = op(
    "_fused_adamw_", doc="PyTorch's AdamW step (decoupled weight decay) for many parameters in one call.", method=False
)(_fused_adam_forward("_fused_adamw_", decoupled=True))


# ----------------------------------------------------------------------------------------------
# loss scaling
def _check_flag(op, name, t, device, dtype):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if t.numel() != 1 or t.dtype is not dtype:
        raise DTypeError(
            f"{op}: {name} must be a one-element {dtype} tensor, got one of dtype {t.dtype} and "
            f"shape {fmt_shape(t.shape)}"
        )
    if device is not None and t._device != device:
        raise DeviceError(f"{op}: {name} is on {t._device} but the tensors are on {device}")


@op(
    "_amp_foreach_non_finite_check_and_unscale_",
    method=False,
    doc="Gradients times inv_scale in place; found_inf set where any is inf or NaN.",
)
def _amp_foreach_non_finite_check_and_unscale_(
    self: Tensors, found_inf: Tensor, inv_scale: Tensor, *, out: Tensors | None = None
) -> None:
    """PyTorch's: multiply every tensor of ``self`` (gradients) by ``inv_scale`` in place, and set
    ``found_inf`` to 1.0 if any of them holds an inf or a NaN (it is never reset to 0 here).
    ``found_inf`` and ``inv_scale`` are one-element float32 tensors on the gradients' device, so
    nothing is read on the host. Beyond PyTorch: ``out`` (one tensor per gradient, of its shape, in
    its dtype or a wider one, e.g. float32 for float16 gradients) receives the unscaled values and
    ``self`` is left as it is."""
    op = "_amp_foreach_non_finite_check_and_unscale_"
    grads = _tensor_list(op, "self", self)
    outs = grads if out is None else _tensor_list(op, "out", out)
    _same_length(op, "self", grads, out=outs)
    device = _one_device(op, grads + outs)
    _check_flag(op, "found_inf", found_inf, device, dt.float32)
    _check_flag(op, "inv_scale", inv_scale, device, dt.float32)
    _refuse_autograd(op, grads, outs, (found_inf, inv_scale))
    _check_writable(op, outs)
    _check_floating(op, "self", grads)
    if out is not None:
        _check_shapes(op, "out", outs, [("self", grads)])
        _check_floating(op, "out", outs)
    if device is None:
        return
    bk = primitives_on(device)
    flag = bk.unscale_and_check_(_arrays(outs), _arrays(grads), inv_scale._data)
    bk.copy_(found_inf._data, bk.binary("maximum", found_inf._data, flag, dt.float32))
    _bump(outs, (found_inf,))


@op(
    "_amp_update_scale_",
    method=False,
    doc="PyTorch's dynamic loss-scale update, in place, kept within [min_scale, max_scale].",
)
def _amp_update_scale_(
    self: Tensor,
    growth_tracker: Tensor,
    found_inf: Tensor,
    scale_growth_factor: float,
    scale_backoff_factor: float,
    growth_interval: int,
    *,
    min_scale: float = 0.0,
    max_scale: float = math.inf,
) -> Tensor:
    """PyTorch's dynamic loss-scale update, in place on ``self`` (the one-element float32 scale) and
    ``growth_tracker`` (one-element int32): when ``found_inf`` (one-element float32) is nonzero the
    scale backs off and the tracker restarts, after ``growth_interval`` clean calls in a row the scale
    grows. Nothing is read on the host. Beyond PyTorch: the scale is kept within
    ``[min_scale, max_scale]``. Returns ``self``."""
    op = "_amp_update_scale_"
    _check_flag(op, "self", self, None, dt.float32)
    device = self._device
    _check_flag(op, "growth_tracker", growth_tracker, device, dt.int32)
    _check_flag(op, "found_inf", found_inf, device, dt.float32)
    _refuse_autograd(op, (self, growth_tracker, found_inf))
    bk = primitives_on(device)
    # the primitive takes 0-d arrays; PyTorch keeps the scale and tracker as shape (1,)
    scalar = [bk.view(t._data, ()) for t in (self, growth_tracker, found_inf)]
    bk.update_scale_(
        *scalar,
        float(scale_growth_factor),
        float(scale_backoff_factor),
        int(growth_interval),
        float(min_scale),
        float(max_scale),
    )
    _bump((self, growth_tracker))
    return self
