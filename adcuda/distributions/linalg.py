"""The little linear algebra MultivariateNormal needs, composed of adcuda's ops (so autograd
differentiates it on every backend): Cholesky factors and triangular solves, one column or row per
step, batched over leading dimensions. Cost O(n) ops for an n x n matrix: meant for the event sizes
of distributions (tens), not for large factorisations."""

from . import _torch as torch


def _cholesky_columns(matrix):
    """The columns of the lower Cholesky factor of ``matrix`` (..., n, n), and each pivot before its
    square root (positive exactly where the matrix is positive definite so far)."""
    n = matrix.shape[-1]
    columns, pivots = [], []
    for j in range(n):
        below = matrix[..., j:, j]
        if j:
            done = torch.stack(columns, -1)  # (..., n, j)
            below = below - (done[..., j:, :] * done[..., j : j + 1, :]).sum(-1)
        pivot = below[..., 0]
        pivots.append(pivot)
        root = pivot.clamp(min=torch.finfo(matrix.dtype).tiny).sqrt()
        column = below / root.unsqueeze(-1)
        if j:
            column = torch.cat([torch.zeros_like(matrix[..., :j, j]), column], -1)
        columns.append(column)
    return columns, pivots


def cholesky(matrix):
    """The lower triangular L with L L^T = ``matrix`` (symmetric positive definite, (..., n, n))."""
    columns, pivots = _cholesky_columns(matrix)
    if not bool((torch.stack(pivots, -1) > 0).all()):
        raise ValueError(
            f"cholesky: the input is not positive-definite (shape {tuple(matrix.shape)}): "
            "a leading minor is not positive"
        )
    return torch.stack(columns, -1)


def cholesky_diagonal_positive(matrix):
    """Per matrix of (..., n, n): whether its Cholesky factorisation succeeds (positive definite)."""
    _, pivots = _cholesky_columns(matrix.detach())
    return (torch.stack(pivots, -1) > 0).all(-1)


def solve_lower(lower, rhs):
    """X with ``lower`` @ X = ``rhs``: lower (..., n, n) lower triangular, rhs (..., n, m); broadcast."""
    n = lower.shape[-1]
    rows = []
    for i in range(n):
        value = rhs[..., i, :]
        if i:
            done = torch.stack(rows, -2)  # (..., i, m)
            value = value - (lower[..., i, :i].unsqueeze(-1) * done).sum(-2)
        rows.append(value / lower[..., i, i].unsqueeze(-1))
    return torch.stack(rows, -2)


def solve_lower_vector(lower, vector):
    """y with ``lower`` @ y = ``vector`` (..., n), broadcast."""
    return solve_lower(lower, vector.unsqueeze(-1)).squeeze(-1)


def inverse_lower(lower):
    n = lower.shape[-1]
    identity = torch.eye(n, dtype=lower.dtype, device=lower.device)
    return solve_lower(lower, identity.expand(lower.shape))
