"""adcuda's exception classes.

Each subclasses the matching built-in exception, so ``except ValueError`` in user code keeps working,
and every message names the op and the shapes, dtypes or devices involved.
"""


class AdcudaError(Exception):
    """Base class of every error adcuda raises on purpose."""


class ShapeError(AdcudaError, ValueError, RuntimeError):
    """Shapes that cannot be combined (broadcasting, matmul, views, sizes). Also a RuntimeError, the
    class PyTorch raises for these, so code written against PyTorch catches it."""


class DTypeError(AdcudaError, TypeError, RuntimeError):
    """A dtype an op does not accept, or a value that cannot become a tensor."""


class ResultTypeError(AdcudaError, RuntimeError):
    """An in-place op or ``out=`` whose result type cannot be written into the tensor given (a float
    result into an integer tensor): PyTorch raises RuntimeError here, not TypeError, so this is no
    DTypeError."""


class InvalidArgumentError(AdcudaError, ValueError, RuntimeError):
    """An argument value an op does not accept (a mode name, a negative count, a value out of its domain)."""


class DeviceError(AdcudaError, RuntimeError):
    """Tensors on different devices, or a device that is not usable."""


class BadForkError(DeviceError):
    """CUDA was used in a process forked after its parent initialised CUDA. Start such processes with
    the 'spawn' or 'forkserver' start method. (``adcuda.cuda.BadForkError``; defined here, with the
    other classes, because the backends refuse with it too.)"""


class IndexOutOfRangeError(AdcudaError, IndexError, RuntimeError):
    """A dim or an index outside the tensor."""


class EmptyReductionError(AdcudaError, IndexError, RuntimeError):
    """A reduction with no identity (max, argmin, kthvalue...) over an empty dim: PyTorch's IndexError
    ("Expected reduction dim 0 to have non-zero size")."""


class IndexValueError(AdcudaError, RuntimeError):
    """An index tensor holding a position outside the dim it addresses (gather, scatter, index_add...),
    or of a dtype that cannot address one: PyTorch's RuntimeError, not an IndexError."""


class LayoutError(AdcudaError, NotImplementedError):
    """An op that does not take a tensor of this layout (a sparse tensor where only dense ones are
    taken); a ``NotImplementedError``, as PyTorch raises for them."""


class AutogradError(AdcudaError, RuntimeError):
    """Misuse of the autograd graph: freed graph, in-place modification of a saved value, ..."""


class DimOutOfRangeError(IndexOutOfRangeError, ValueError):
    """A dim outside the tensor, where NumPy raised its AxisError (both an IndexError and a ValueError)."""


class ArgumentTypeError(DTypeError, AttributeError):
    """An argument of a type without an attribute the op reads (a list where a tensor belongs): a
    TypeError, and still the AttributeError Python raised, so ``hasattr`` keeps its meaning."""


class MissingKeyError(AdcudaError, KeyError):
    """A key an op looked up and did not find."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class OpRuntimeError(AdcudaError, RuntimeError):
    """An op failed below its own checks (an error of NumPy, of the native module or of Python inside its
    forward) with no more specific class."""


class DivisionByZeroError(AdcudaError, ZeroDivisionError, RuntimeError):
    """A division by zero inside an op (integer division and remainder). Also a RuntimeError, the
    class PyTorch raises for it ("ZeroDivisionError" is its message)."""


class NumericOverflowError(AdcudaError, OverflowError):
    """A value too large for the type it is converted to inside an op."""


class NumericError(AdcudaError, FloatingPointError):
    """Another arithmetic error inside an op (FloatingPointError, ArithmeticError)."""


class UnsupportedError(AdcudaError, NotImplementedError):
    """What an op does not implement for these arguments."""


class UnsupportedDTypeError(UnsupportedError):
    """A tensor of a dtype the op is not defined for (``abs`` of a bool tensor, ``gelu`` of an integer
    one, ``where`` with a float condition): PyTorch raises NotImplementedError ("'abs_cpu' not
    implemented for 'Bool'") or RuntimeError there, never TypeError, and a NotImplementedError is
    both. (A DTypeError is a TypeError: an argument of the wrong kind, such as a list for a tensor.)"""


class HostMemoryError(AdcudaError, MemoryError):
    """An allocation on the host failed inside an op."""


# The adcuda class for an error that NumPy or Python raised inside an op, by the built-in classes it
# derives from (most specific first), so that ``except IndexError`` and the like still catch it.
_ADAPTED = (
    ((IndexError, ValueError), DimOutOfRangeError),  # NumPy's AxisError
    ((IndexError,), IndexOutOfRangeError),
    ((ZeroDivisionError,), DivisionByZeroError),
    ((OverflowError,), NumericOverflowError),
    ((ArithmeticError,), NumericError),
    ((NotImplementedError,), UnsupportedError),
    ((ValueError,), InvalidArgumentError),
    ((TypeError,), DTypeError),
    ((AttributeError,), ArgumentTypeError),
    ((KeyError,), MissingKeyError),
    ((MemoryError,), HostMemoryError),
    ((Exception,), OpRuntimeError),
)


def _describe_argument(value):
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None and hasattr(value, "device"):
        return f"tensor of shape {fmt_shape(shape)}, {dtype}, on {value.device}"
    if isinstance(value, (list, tuple)) and value and all(hasattr(v, "device") for v in value):
        return "[" + "; ".join(_describe_argument(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def adapt_error(op_name, error, arguments):
    """The adcuda error for ``error`` (NumPy's or Python's, raised inside op ``op_name``), naming the op
    and its arguments (``(name, value)`` pairs: tensors by shape, dtype and device). The caller raises
    it ``from`` the original, which stays as ``__cause__``. An adcuda error is returned with the op
    named first in its message; an exception of another library or of user code (a callback) as it is."""
    if isinstance(error, AdcudaError):
        _name_the_op(error, op_name)
        return error
    module = type(error).__module__
    if module != "builtins" and not module.startswith("numpy"):
        return error
    adapted = next(cls for builtins, cls in _ADAPTED if all(isinstance(error, b) for b in builtins))
    message = str(error)
    described = ", ".join(f"{name}={_describe_argument(value)}" for name, value in arguments if value is not None)
    message = message or type(error).__name__
    if not message.startswith(op_name.rstrip("_")):
        message = f"{op_name}: {message}"
    return adapted(f"{message} (arguments: {described})")


def _name_the_op(error, op_name):
    """Begin an adcuda error's message with the op the user called when an op it is made of raised it
    (``broadcast_to: expand: ...``); the error itself, its class and traceback, stay."""
    args = error.args
    if len(args) == 1 and isinstance(args[0], str) and not args[0].startswith(op_name.rstrip("_")):
        error.args = (f"{op_name}: {args[0]}",)


class SettingError(AdcudaError, RuntimeError):
    """A process-wide setting given a value it cannot take, or set when it no longer can be
    (``set_num_threads(0)``, a second ``set_num_interop_threads``), as PyTorch's RuntimeError."""


def fmt_shape(shape):
    """``(3, 4)`` as PyTorch users read it (a 1-tuple keeps its comma)."""
    return str(tuple(shape))
