"""``RemovableHandle``: what registering a hook returns (a tensor's gradient hook, a node's, a module's or
an optimizer's), as PyTorch's ``torch.utils.hooks.RemovableHandle``.

It sits on the ground floor, below ``tensor``, because nothing of it depends on tensors or autograd: so
the declarations of ``Tensor.register_hook`` (adcuda/_tensor_ops.pyi) name it without an import circle.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, hooks_dict: dict[int, Any], hook: Any) -> None:
        self.id = next(self._ids)
        self._hooks = hooks_dict
        hooks_dict[self.id] = hook

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
