"""Every op: forward (a primitive call) and backward rule, in one place per op.

Importing this package attaches the ops to ``Tensor`` as methods and operators.
"""
from . import conversion, elementwise, indexing, inplace, linalg, nn_ops, reduction, shape, sorting  # noqa: F401
