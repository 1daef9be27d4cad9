"""Models and training steps that more than one suite times, written with the ``nn`` API of the
library passed in (adcuda or PyTorch), exactly as a PyTorch user would write them."""


def mlp(nn, sizes):
    """``Linear`` layers from ``sizes[0]`` features to ``sizes[-1]``, a ReLU between each two."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def lenet5(nn, padding=0):
    """LeNet-5 on 1-channel images: 32x32 ones, or 28x28 ones with ``padding=2``."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=padding),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 32x32 -> 28x28 -> 14x14
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),  # -> 10x10 -> 5x5
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def training_step(opt, loss_of):
    """The closure a case times: clear the gradients, compute ``loss_of()``, backward, step ``opt``."""

    def step():
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        opt.step()
        return loss

    return step
