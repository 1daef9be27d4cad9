"""Memory layouts (``adcuda.strided``, ``adcuda.sparse_coo``): ``Tensor.layout`` says which one a tensor
has, as ``torch.layout`` does. A dense tensor is strided; a sparse COO tensor (adcuda/ops/sparse.py)
stores indices and values instead of every element."""


class layout:  # noqa: N801 (PyTorch's name: torch.layout)
    """A tensor's memory layout; compared by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"adcuda.{self.name}"

    def __reduce__(self):
        return self.name  # pickles as the module-level instance of that name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
