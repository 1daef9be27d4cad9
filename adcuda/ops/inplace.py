"""In-place ops (``add_ sub_ mul_ div_ pow_ clamp_ zero_ fill_ copy_`` and ``+= -= *= /=``).

Each runs its out-of-place op, writes the result into the tensor's memory and bumps the version
counter that saved values are checked against. When a graph is being recorded the value is cloned
first, so a backward rule that saved the old value keeps it.
"""
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor
from ._core import check_inplace_allowed, commit_inplace, needs_grad, wrap
from . import elementwise as ew


def _inplace_from(name, fn):
    def method_(self, *args, **kwargs):
        check_inplace_allowed(self, name)
        recording = needs_grad(self, *args)
        source = self.clone() if recording else self
        result = fn(source, *args, **kwargs)
        if result.dtype is not self.dtype:
            if result.dtype.category > self.dtype.category:
                raise DTypeError(f"{name}: result type {result.dtype} can't be cast to the desired output "
                                 f"type {self.dtype}")
            result = result.to(dtype=self.dtype)
        if not recording:
            try:
                result = result.expand(tuple(self.shape)) if tuple(result.shape) != tuple(self.shape) else result
            except ShapeError:
                pass
        return commit_inplace(self, result, name)
    method_.__name__ = name
    return method_


Tensor.add_ = _inplace_from("add_", ew.add)
Tensor.sub_ = _inplace_from("sub_", ew.sub)
Tensor.mul_ = _inplace_from("mul_", ew.mul)
Tensor.div_ = _inplace_from("div_", ew.div)
Tensor.pow_ = _inplace_from("pow_", ew.pow)
Tensor.clamp_ = Tensor.clip_ = _inplace_from("clamp_", ew.clamp)
Tensor.neg_ = _inplace_from("neg_", ew.neg)
Tensor.exp_ = _inplace_from("exp_", ew.exp)
Tensor.sqrt_ = _inplace_from("sqrt_", ew.sqrt)
Tensor.relu_ = _inplace_from("relu_", ew.relu)
Tensor.sigmoid_ = _inplace_from("sigmoid_", ew.sigmoid)
Tensor.tanh_ = _inplace_from("tanh_", ew.tanh)
Tensor.__iadd__ = Tensor.add_
Tensor.__isub__ = Tensor.sub_
Tensor.__imul__ = Tensor.mul_
Tensor.__itruediv__ = Tensor.div_


def _fill(self, value, op):
    check_inplace_allowed(self, op)
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"{op}: only supports a 0-dimensional value tensor, got shape {fmt_shape(value.shape)}")
        if needs_grad(value):
            return commit_inplace(self, value.to(dtype=self.dtype).expand(tuple(self.shape)), op)
        value = value.item()
    if needs_grad(self):
        from ..factories import full
        return commit_inplace(self, full(tuple(self.shape), value, dtype=self.dtype, device=self.device), op)
    return _write_untracked(self, value, op)


def _write_untracked(self, data, op):
    """Write ``data`` (backend array or scalar) into ``self`` with nothing to record."""
    try:
        self._backend.copy_(self._data, data)
    except ValueError as e:
        raise ShapeError(f"{op}: cannot write into this tensor of shape {fmt_shape(self.shape)} in place "
                         f"({e})") from None
    self._version.value += 1
    return self


def fill_(self, value):
    return _fill(self, value, "fill_")


def zero_(self):
    return _fill(self, 0, "zero_")


def copy_(self, src, non_blocking=False):
    check_inplace_allowed(self, "copy_")
    if not isinstance(src, Tensor):
        raise DTypeError(f"copy_: src must be a Tensor, got {type(src).__name__}")
    if src._device != self._device or src.dtype is not self.dtype:
        src = src.to(self._device, self.dtype)
    try:
        value = src.expand(tuple(self.shape))
    except ShapeError:
        raise ShapeError(f"copy_: src of shape {fmt_shape(src.shape)} cannot be broadcast to "
                         f"{fmt_shape(self.shape)}") from None
    if needs_grad(src) or needs_grad(self):
        return commit_inplace(self, value.clone(), "copy_")
    return _write_untracked(self, value._data, "copy_")


Tensor.fill_ = fill_
Tensor.zero_ = zero_
Tensor.copy_ = copy_
