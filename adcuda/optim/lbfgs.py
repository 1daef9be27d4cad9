"""``LBFGS``: limited-memory BFGS over all parameters as one flat vector, with an optional
strong-Wolfe line search (Nocedal & Wright, Numerical Optimization, algorithms 3.5, 3.6 and 7.4).

The scalars of the method (curvatures, step lengths, losses) are Python floats: one host read per
dot product, as the branches on them need their values anyway.
"""

import math
from collections.abc import Callable
from typing import Any

from ..autograd.grad_mode import enable_grad, no_grad
from ..factories import zeros
from ..ops.layout import cat
from .optimizer import Optimizer, OptimizerError, ParamsT, hyperparameters


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clipped to
    ``bounds`` (default: between x1 and x2); their midpoint when the cubic has no minimum."""
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (xmin_bound + xmax_bound) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, xmin_bound), xmax_bound)


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step length along ``d`` from ``x`` (loss ``f``, flat gradient ``g``, slope ``gtd``) meeting
    the strong Wolfe conditions: bracket a point, then zoom in by cubic interpolation. Returns
    ``(loss, flat gradient, step, function evaluations)``."""
    d_norm = d.abs().max().item()
    g = g.clone()
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d).item()
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    # bracketing phase
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # extrapolate, at least 1% past the last step and at most ten times it
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    # zoom phase: shrink the bracket until a point meets the conditions or it is too small
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # a point too near an end of the bracket makes little progress: move it inside, once in a row
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new.clone(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """PyTorch's L-BFGS. ``step(closure)`` runs up to ``max_iter`` iterations (``max_eval`` closure
    calls, default ``max_iter * 5 // 4``); ``closure`` clears the gradients, computes the loss,
    calls ``backward`` and returns the loss. ``history_size`` curvature pairs approximate the inverse
    Hessian; ``line_search_fn`` is None (fixed step ``lr``) or ``'strong_wolfe'``. It stops early
    when the largest gradient element is at most ``tolerance_grad`` or the step or the loss changes
    by less than ``tolerance_change``. One parameter group only."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if not 0.0 <= lr:
            raise OptimizerError(f"LBFGS: invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise OptimizerError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, hyperparameters(locals()))
        if len(self.param_groups) != 1:
            raise OptimizerError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ------------------------------------------------------------------ the parameters as one vector
    def _gather_flat_grad(self):
        views = [
            zeros(p.numel(), dtype=p.dtype, device=p.device) if p.grad is None else p.grad.reshape(-1)
            for p in self._params
        ]
        return cat(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset : offset + numel].view(tuple(p.shape)), alpha=step_size)
            offset += numel

    def _directional_evaluate(self, closure, x, t, d):
        """Loss and flat gradient at ``x + t * d``; the parameters are left at ``x``."""
        self._add_grad(t, d)
        with enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x):
            p.copy_(saved)
        return loss, flat_grad

    # ------------------------------------------------------------------ step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        if closure is None:
            raise OptimizerError("LBFGS.step needs a closure that reevaluates the model and returns the loss")
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise OptimizerError(
                f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {group['line_search_fn']!r}"
            )
        # the whole method's state lives with the first parameter, as in PyTorch
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max().item() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")  # noqa: N806 (the method's name for it)
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1  # noqa: N806
            else:
                # a new curvature pair, kept when the curvature is positive enough
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s).item()
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y).item()  # noqa: N806
                # the two-loop recursion: d = -H g with the approximate inverse Hessian H
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q).item() * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q.mul(H_diag)
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r).item() * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the first step is scaled down by the gradient's size: nothing is known of the curvature yet
            t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d).item()
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break

            evals = 0
            if group["line_search_fn"] == "strong_wolfe":
                x_init = [p.clone() for p in self._params]

                def obj_func(x, step, direction):
                    return self._directional_evaluate(closure, x, step, direction)

                loss, flat_grad, t, evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max().item() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    # re-evaluate unless this was the last iteration (the caller's next step will)
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max().item() <= tolerance_grad
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max().item() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=H_diag,
            prev_flat_grad=prev_flat_grad,
            prev_loss=prev_loss,
        )
        return orig_loss
