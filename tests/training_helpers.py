"""Helpers more than one test file uses that need adcuda.nn or adcuda.train (see helpers.py)."""

import adcuda
from adcuda import nn
from adcuda.train.loop import Reporter


class StopAfterEpoch(Reporter):
    """Acts like Ctrl-C right after an epoch's checkpoint was written."""

    def __init__(self, epoch):
        super().__init__(quiet=True)
        self.epoch = epoch

    def line(self, text):
        if text.startswith(f"epoch {self.epoch:>3}/"):
            raise KeyboardInterrupt


class CausalBlock(nn.Module):
    """A pre-norm GELU transformer block (a GPT block) under a causal mask: what the exporters must carry
    through whole."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            16, 4, dim_feedforward=32, batch_first=True, norm_first=True, activation="gelu"
        )

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.layer(x, src_mask=mask, is_causal=True)


class MatrixVector(nn.Module):
    """Matrix @ vector by a computed vector and by a ``width``-long parameter: one matmul each."""

    def __init__(self, width):
        super().__init__()
        self.w = nn.Parameter(adcuda.randn(width))

    def forward(self, x, v):
        return x @ v, (x @ self.w).tanh()
