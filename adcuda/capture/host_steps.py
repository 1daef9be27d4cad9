"""Faster stand-ins a replay calls for some host steps (``dispatch.host_step``), doing what the host
step does:

- An optimizer's ``step()`` (without a closure): the optimizer's own ``_step_with_scratch``, graph
  capture's protocol (adcuda/optim/optimizer.py), with the program's scratch arrays, so its fused
  op's primitive reuses its temporaries from one replay to the next instead of allocating them. It
  is the step itself, the same multi-tensor op and primitive: hyperparameters, step counts and state
  are read afresh on each replay, and a configuration the fused op does not take is the step's own
  business. An optimizer without the protocol (or a subclass with a ``step`` of its own) is replayed
  by its ``step``.

Other host steps (the losses' class-target check among them) are replayed by calling them.
"""


def host_step_replay(step, scratch):
    """(a callable doing what host step ``step`` does, faster, with its arguments; what it is, for a
    printed program), or None where there is none (the host step itself runs then)."""
    fn = step.fn
    if len(step.args) != 1 or step.kwargs:
        return None  # an optimizer step with a closure runs it: the host step itself
    step_with_scratch = _optimizer_protocol(step.args[0], fn)
    if step_with_scratch is None:
        return None

    def optimizer_step(opt):
        return step_with_scratch(opt, scratch)

    return optimizer_step, "its _step_with_scratch: the step, with the program's scratch arrays"


def _optimizer_protocol(opt, fn):
    """The optimizer's ``_step_with_scratch`` (graph capture's protocol, adcuda/optim/optimizer.py) if
    host step ``fn`` is its class's ``step`` and the class that defines that ``step`` also defines
    it (a subclass with a ``step`` of its own is replayed by its ``step``), else None."""
    for cls in type(opt).__mro__:
        if "step" in cls.__dict__:
            if getattr(cls.__dict__["step"], "host_step", None) is not fn:
                return None
            return cls.__dict__.get("_step_with_scratch")
    return None


__all__ = ["host_step_replay"]
