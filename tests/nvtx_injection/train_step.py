"""One training step of a tiny MLP, run by test_nvtx.py in a process whose NVTX calls go to the
recorder library (NVTX_INJECTION64_PATH).

    python train_step.py nvtx|shapes|names|off|env
nvtx: under emit_nvtx(); shapes: emit_nvtx(record_shapes=True); names: emit_nvtx(sequence_numbers=False);
off: no emission asked for; env: no emit_nvtx() call (ADCUDA_NVTX=1 is expected in the environment).
Each mode ends with an op that raises, caught, to show its range is closed all the same.
"""

import contextlib
import sys

import adcuda as torch
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.profiler import emit_nvtx, record_function
from adcuda.utils.data import DataLoader, TensorDataset


def main(mode):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)))
    loader = DataLoader(data, batch_size=8)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    session = {
        "nvtx": emit_nvtx(),
        "shapes": emit_nvtx(record_shapes=True),
        "names": emit_nvtx(sequence_numbers=False),
    }.get(mode, contextlib.nullcontext())
    with session:
        with record_function("train_step"):
            x, y = next(iter(loader))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        try:
            torch.ones(2) + torch.ones(3)
        except ValueError:
            print("the failing op raised")


if __name__ == "__main__":
    main(sys.argv[1])
