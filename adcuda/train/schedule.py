"""The learning-rate schedule ``adcuda train`` uses: linear warm-up, then cosine decay to a floor."""

import math


class WarmupCosine:
    """A ``LambdaLR`` factor for step ``step``: ``(step + 1) / warmup`` during the warm-up, then a cosine
    from 1 down to ``floor`` at ``total`` steps (and ``floor`` after it).

    A callable object rather than a lambda, so that ``LambdaLR.state_dict()`` saves its fields and a
    resumed run gets the same schedule.
    """

    def __init__(self, warmup, total, floor=0.0):
        if total <= 0 or warmup < 0:
            raise ValueError(f"WarmupCosine: need total > 0 and warmup >= 0, got total={total}, warmup={warmup}")
        self.warmup = int(warmup)
        self.total = int(total)
        self.floor = float(floor)

    def __call__(self, step):
        if step < self.warmup:
            return (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.floor + (1.0 - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
