"""``adcuda.nn.functional`` (``import adcuda.nn.functional as F``): PyTorch's functional NN API.

Every name here is an op declared in the registry (``adcuda/ops/``) with a functional form; an op
that has an in-place form takes ``inplace=`` here and has an ``F.<name>_`` too (``relu_``).
"""

from typing import TYPE_CHECKING

from ..ops import functional_forms as _functional_forms

globals().update(_functional_forms())
__all__ = sorted(_functional_forms())

if TYPE_CHECKING:
    # the names are made at run time above, where type checkers cannot see them: their stub declares them
    # (generated from the registry by scripts/gen_type_stubs.py)
    from ._functional_ops import *  # noqa: F403
