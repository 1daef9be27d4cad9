"""adcuda's exception classes.

Each subclasses the matching built-in exception, so ``except ValueError`` in user code keeps working,
and every message names the op and the shapes, dtypes or devices involved.
"""


class AdcudaError(Exception):
    """Base class of every error adcuda raises on purpose."""


class ShapeError(AdcudaError, ValueError):
    """Shapes that cannot be combined (broadcasting, matmul, views, sizes)."""


class DTypeError(AdcudaError, TypeError):
    """A dtype an op does not accept, or a value that cannot become a tensor."""


class DeviceError(AdcudaError, RuntimeError):
    """Tensors on different devices, or a device that is not usable."""


class BadForkError(DeviceError):
    """CUDA was used in a process forked after its parent initialised CUDA. Start such processes with
    the 'spawn' or 'forkserver' start method. (``adcuda.cuda.BadForkError``; defined here, with the
    other classes, because the backends refuse with it too.)"""


class IndexOutOfRangeError(AdcudaError, IndexError):
    """A dim or an index outside the tensor."""


class LayoutError(AdcudaError, NotImplementedError):
    """An op that does not take a tensor of this layout (a sparse tensor where only dense ones are
    taken); a ``NotImplementedError``, as PyTorch raises for them."""


class AutogradError(AdcudaError, RuntimeError):
    """Misuse of the autograd graph: freed graph, in-place modification of a saved value, ..."""


def fmt_shape(shape):
    """``(3, 4)`` as PyTorch users read it (a 1-tuple keeps its comma)."""
    return str(tuple(shape))
