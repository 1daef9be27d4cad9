"""``pad_sequence``: variable-length sequences as one padded batch (PyTorch's name; packed sequences
are not supported: the recurrent layers take padded batches)."""

from collections.abc import Sequence

from ...errors import DTypeError, ShapeError
from ...factories import full
from ...ops.layout import cat, stack
from ...tensor import Tensor


def pad_sequence(
    sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Sequences of shapes (L_i, *) as (B, max L, *) with batch_first, else (max L, B, *), each
    padded with ``padding_value`` on ``padding_side`` ("right" or "left")."""
    sequences = list(sequences)
    if not sequences or any(not isinstance(s, Tensor) for s in sequences):
        raise DTypeError("pad_sequence: expected a non-empty sequence of Tensors")
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if s.ndim == 0 or tuple(s.shape[1:]) != trailing:
            raise ShapeError(
                f"pad_sequence: every sequence must be (L, {', '.join(map(str, trailing))}), got {tuple(s.shape)}"
            )
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = full((missing, *trailing), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)
