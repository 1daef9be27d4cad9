"""What a range is called and what it says about its op: the autograd sequence number linking a
forward op to its backward node, input shapes, bytes of new results, and the user's call site."""

import os
import sys

from ..autograd import graph
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def records_graph(args):
    """Whether an op on ``args`` (an iterable of arguments) records an autograd node, so that its
    range gets a sequence number."""
    if not is_grad_enabled():
        return False
    for a in args:
        if a.__class__ is Tensor:
            if a._requires_grad or a.grad_fn is not None:
                return True
        elif a.__class__ in (list, tuple):
            for t in a:
                if t.__class__ is Tensor and (t._requires_grad or t.grad_fn is not None):
                    return True
    return False


def next_sequence_nr():
    """The sequence number the next autograd node will get (``Node.seq``).

    ``itertools.count`` has no peek, and taking a number would leave a gap in the sequence; its
    repr, ``count(N)``, shows the next value without consuming it."""
    return int(repr(graph._sequence)[6:-1])


def input_shapes(args):
    """PyTorch's ``input_shapes``: one entry per positional argument; [] for non-tensors."""
    shapes = []
    for a in args:
        if a.__class__ is Tensor:
            shapes.append(list(a._data.shape))
        elif a.__class__ in (list, tuple) and a and all(b.__class__ is Tensor for b in a):
            shapes.append([list(b._data.shape) for b in a])
        else:
            shapes.append([])
    return shapes


def op_label(name, seq, shapes):
    """PyTorch emit_nvtx's message: ``mul, seq = 42, sizes = [[3, 4], [4]]``."""
    label = name if seq is None else f"{name}, seq = {seq}"
    return label if shapes is None else f"{label}, sizes = {shapes}"


def new_bytes(result, inputs):
    """Bytes of the result arrays an op allocated: outputs that are neither an input (in-place
    ops return ``self``) nor a view of another tensor's memory."""
    if result.__class__ is Tensor:
        outputs = (result,)
    elif isinstance(result, (tuple, list)):
        outputs = [r for r in result if r.__class__ is Tensor]
    else:
        return 0
    total = 0
    for out in outputs:
        if out._base is None and not any(out is a for a in inputs):
            total += getattr(out._data, "nbytes", 0)
    return total


def user_stack(limit=5):
    """The innermost ``limit`` frames of the caller outside adcuda, as ``file(line): function``."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    stack = []
    while frame is not None and len(stack) < limit:
        code = frame.f_code
        stack.append(f"{code.co_filename}({frame.f_lineno}): {code.co_name}")
        frame = frame.f_back
    return stack
