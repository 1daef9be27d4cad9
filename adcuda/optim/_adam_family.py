"""What Adam, Adamax, NAdam and RAdam share: the hyperparameters PyTorch's constructors check and (but
Adam) their lazily made state."""

from ..factories import tensor, zeros_like

# the hyperparameters of the Adam family that PyTorch's constructors require to be >= 0
ADAM_NONNEGATIVE = ("lr", "eps", "weight_decay")


def first_moments(state, p, second):
    """The step counter and the zeroed moment buffers of a parameter's first step (PyTorch makes them
    lazily); ``second`` names the second buffer (exp_avg_sq or exp_inf)."""
    if not state:
        state["step"] = tensor(0.0)
        state["exp_avg"] = zeros_like(p.detach())
        state[second] = zeros_like(p.detach())
    return state
