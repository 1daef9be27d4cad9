"""adcuda.export.to_c: the generated C99 compiles warning-free and reproduces adcuda's forward.

Each model is exported, compiled with ``cc -std=c99 -O2 -Wall -Werror`` (conftest.py's ``compile_c``) together
with the generated runner (``<name>_main.c``), run on the same inputs as adcuda, and compared (rtol
1e-4). Skipped where no C compiler is found.
"""

import os
import subprocess

import numpy as np
import pytest
from training_helpers import CausalBlock, MatrixVector

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.export import ExportError, to_c


def run_c(compile_c, export, directory, inputs):
    """The C forward's outputs on ``inputs`` (NumPy arrays), through the generated runner."""
    exe = compile_c([export.source, os.path.join(directory, f"{export.name}_main.c")], os.path.join(directory, "run"))
    paths = []
    for i, x in enumerate(inputs):
        paths.append(os.path.join(directory, f"in{i}.bin"))
        np.ascontiguousarray(x, np.float32).tofile(paths[-1])
    outs = [os.path.join(directory, f"out{i}.bin") for i in range(len(export.output_shapes))]
    command = [exe] + ([export.weights] if export.weights else []) + paths + outs
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [np.fromfile(p, np.float32).reshape(shape) for p, shape in zip(outs, export.output_shapes)]


def reference(model, inputs):
    model.eval()
    with adcuda.no_grad():
        out = model(*inputs)
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def check(compile_c, model, inputs, tmp_path, weights):
    export = to_c(model, tuple(inputs), tmp_path, name="net", weights=weights, runner=True)
    got = run_c(compile_c, export, str(tmp_path), [x.numpy() for x in inputs])
    for g, want in zip(got, reference(model, inputs)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)
    return export


def mlp():
    model = nn.Sequential(
        nn.Linear(8, 32),
        nn.BatchNorm1d(32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.GELU(),
        nn.LayerNorm(32),
        nn.Linear(32, 16),
        nn.Tanh(),
        nn.Linear(16, 16),
        nn.GELU(approximate="tanh"),
        nn.Linear(16, 16),
        nn.Sigmoid(),
        nn.Linear(16, 5),
        nn.Softmax(dim=-1),
    )
    model[1].running_mean.copy_(adcuda.randn(32))
    model[1].running_var.copy_(adcuda.rand(32) + 0.5)
    return model


def cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 6, 3, padding=2, dilation=2, bias=False),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(6 * 2 * 2, 7),
        nn.LogSoftmax(dim=1),
    )
    for bn in (model[1], model[5]):  # statistics away from (0, 1), so that folding them matters
        bn.running_mean.copy_(adcuda.randn(8))
        bn.running_var.copy_(adcuda.rand(8) + 0.5)
        bn.weight.data.copy_(adcuda.randn(8))
        bn.bias.data.copy_(adcuda.randn(8))
    return model


@pytest.mark.parametrize("weights", ["embedded", "file"])
def test_mlp_matches_adcuda(compile_c, tmp_path, weights):
    adcuda.manual_seed(0)
    export = check(compile_c, mlp(), [adcuda.randn(7, 8)], tmp_path, weights)
    assert export.output_shapes == [(7, 5)]
    assert "/* binary" not in open(export.source).read()  # the batch norm folded into the first Linear
    assert (export.weights is not None) == (weights == "file")


@pytest.mark.parametrize("weights", ["embedded", "file"])
def test_cnn_matches_adcuda_with_batchnorm_folded(compile_c, tmp_path, weights):
    adcuda.manual_seed(1)
    export = check(compile_c, cnn(), [adcuda.randn(2, 3, 16, 16)], tmp_path, weights)
    source = open(export.source).read()
    # three convolutions carry both batch norms, their biases and ReLUs: no loop of their own remains
    assert source.count("/* conv2d:") == 3
    assert "/* binary mul" not in source and "/* unary relu" not in source
    # the average pool is one loop over its windows (the backend's avg_pool2d primitive)
    assert source.count("/* avg_pool2d:") == 1 and "/* slice" not in source and "/* binary" not in source


def test_layer_norm_over_two_dims_and_softmax_over_a_middle_dim(compile_c, tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm((4, 6))
            self.proj = nn.Linear(6, 6)

        def forward(self, x):
            return F.softmax(self.proj(self.norm(x)), dim=1) * 2.0 - F.silu(x).clamp(-0.5, 0.5)

    adcuda.manual_seed(2)
    check(compile_c, Net(), [adcuda.randn(3, 4, 6)], tmp_path, "embedded")


def test_two_inputs_two_outputs_and_a_view_output(compile_c, tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(6, 4)

        def forward(self, x, y):
            h = self.a(x) + y
            return adcuda.cat([h, y * 2.0, h], dim=1).reshape(3, 2, 6), F.log_softmax(h, dim=0)

    adcuda.manual_seed(3)
    export = check(compile_c, Net(), [adcuda.randn(3, 6), adcuda.randn(3, 4)], tmp_path, "file")
    assert export.output_shapes == [(3, 2, 6), (3, 4)]


def test_outputs_that_are_inputs_or_repeated_are_copied(compile_c, tmp_path):
    class Net(nn.Module):
        def forward(self, x):
            h = x.tanh()
            return x, h, h.view(6), x.view(3, 2)

    export = check(compile_c, Net(), [adcuda.randn(2, 3)], tmp_path, "embedded")
    assert open(export.source).read().count("memcpy(out") == 3


def test_permuted_and_batched_products(compile_c, tmp_path):
    class Net(nn.Module):
        def forward(self, q, k):
            return (q @ k.transpose(1, 2)).softmax(-1) @ k

    adcuda.manual_seed(4)
    check(compile_c, Net(), [adcuda.randn(2, 5, 3), adcuda.randn(2, 5, 3)], tmp_path, "embedded")


def test_matrix_vector_products(compile_c, tmp_path):
    # matrix @ vector is one matmul of a vector b (the primitive's matrix-vector form), by a computed
    # vector and by a parameter
    adcuda.manual_seed(5)
    export = check(compile_c, MatrixVector(3), [adcuda.randn(4, 3), adcuda.randn(3)], tmp_path, "embedded")
    assert export.output_shapes == [(4,), (4,)]


def test_padded_and_adaptive_pooling_and_reductions(compile_c, tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.pool = nn.AvgPool2d(3, stride=2, padding=1)
            self.adaptive = nn.AdaptiveAvgPool2d((2, 3))
            self.gap = nn.AdaptiveAvgPool2d(1)

        def forward(self, x):
            h = self.pool(self.conv(F.pad(x, (1, 2, 0, 1), value=0.5)))
            pooled = self.adaptive(h).flatten(1) + self.gap(h).flatten(1).amax(1, keepdim=True)
            return pooled * h.mean((2, 3)).sum(1, keepdim=True) - h.amin(3).prod(2).sum(1, keepdim=True)

    adcuda.manual_seed(6)
    export = check(compile_c, Net(), [adcuda.randn(2, 3, 9, 10)], tmp_path, "embedded")
    source = open(export.source).read()
    assert "/* avg_pool2d:" in source and source.count("/* adaptive_avg_pool2d:") == 2


def test_ceil_mode_dilated_and_rectangular_windows(compile_c, tmp_path):
    model = nn.Sequential(
        nn.Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(0, 2)),
        nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
        nn.Conv2d(4, 4, 2, dilation=2, padding=1),
        nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
    )
    adcuda.manual_seed(7)
    check(compile_c, model, [adcuda.randn(2, 2, 17, 13)], tmp_path, "embedded")


def test_masks_comparisons_and_where(compile_c, tmp_path):
    class Net(nn.Module):
        def forward(self, x, y):
            mask = (x > 0.2) | (y <= -0.5)
            h = F.leaky_relu(x, 0.1) + x.masked_fill(x < 0, 0.5) + mask.float() * y
            return adcuda.where(~mask & (x != y), h, -h) + adcuda.where(x >= y, 1.0, y)

    adcuda.manual_seed(8)
    check(compile_c, Net(), [adcuda.randn(3, 5), adcuda.randn(1, 5)], tmp_path, "embedded")


def test_scratch_memory_is_reused_along_a_chain(tmp_path):
    layers = []
    for _ in range(8):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    export = to_c(nn.Sequential(*layers), adcuda.randn(4, 64), tmp_path)
    one_activation = 4 * 64 * 4
    # 7 intermediate activations, at most two alive at once (the last layer writes the output buffer)
    assert export.scratch_bytes == 2 * one_activation
    assert export.weight_bytes == 8 * (64 * 64 + 64) * 4
    header = open(export.header).read()
    assert "in0:  (4, 64)" in header and "#define MODEL_SCRATCH_BYTES 2048" in header


def test_weights_file_errors_are_return_codes(compile_c, tmp_path):
    adcuda.manual_seed(5)
    export = to_c(nn.Linear(3, 2), adcuda.randn(1, 3), tmp_path, name="tiny", weights="file")
    main = tmp_path / "check_main.c"
    main.write_text(
        '#include <stdio.h>\n#include "tiny.h"\n'
        "int main(int argc, char** argv) {\n"
        "    float x[3] = {1.0f, 2.0f, 3.0f}, y[2];\n"
        "    (void)argc;\n"
        '    printf("%d ", tiny_forward(x, y));\n'
        '    printf("%d ", tiny_load_weights("missing.weights"));\n'
        '    printf("%d ", tiny_forward(x, 0));\n'
        '    printf("%d ", tiny_load_weights(argv[2]));\n'
        '    printf("%d ", tiny_forward(x, y));\n'
        '    printf("%d ", tiny_load_weights(argv[1]));\n'
        '    printf("%d\\n", tiny_forward(x, y));\n'
        "    return 0;\n"
        "}\n"
    )
    exe = compile_c([export.source, main], tmp_path / "check")
    damaged = tmp_path / "damaged.weights"
    damaged.write_bytes(open(export.weights, "rb").read()[:-4])
    result = subprocess.run([exe, str(damaged), export.weights], capture_output=True, text=True, cwd=tmp_path)
    # not loaded, cannot open, NULL buffer; loaded and run; a damaged file unloads them
    assert result.stdout.split() == ["2", "3", "1", "0", "0", "4", "2"]


def test_refusals_name_the_op(tmp_path):
    class Sum(nn.Module):
        def forward(self, x):
            return x.sum((0, 2))

    with pytest.raises(ExportError, match=r"reduce sum over dims \(0, 2\)"):
        to_c(Sum(), adcuda.randn(2, 3, 4), tmp_path)

    class Sort(nn.Module):
        def forward(self, x):
            return x.sort(1)[0]

    with pytest.raises(ExportError, match="primitive sort"):
        to_c(Sort(), adcuda.randn(2, 3), tmp_path)

    with pytest.raises(ExportError, match="int64"):
        to_c(nn.Embedding(10, 4), adcuda.tensor([[1, 2]]), tmp_path)

    class Mask(nn.Module):
        def forward(self, x):
            return x > 0

    with pytest.raises(ExportError, match=r"output 0 \(2, 3\) is adcuda.bool"):
        to_c(Mask(), adcuda.randn(2, 3), tmp_path)

    class Indices(nn.Module):
        def forward(self, x):
            values, indices = F.max_pool2d(x, 2, return_indices=True)
            return values + indices.float()

    with pytest.raises(ExportError, match="max_pool2d"):
        to_c(Indices(), adcuda.randn(1, 1, 4, 4), tmp_path)

    with pytest.raises(ExportError, match="C identifier"):
        to_c(nn.Linear(2, 2), adcuda.randn(1, 2), tmp_path, name="my-model")
    with pytest.raises(ExportError, match="embedded' or 'file"):
        to_c(nn.Linear(2, 2), adcuda.randn(1, 2), tmp_path, weights="separate")
    assert not list(tmp_path.iterdir())  # a refused export writes nothing


def test_causal_pre_norm_transformer_block(compile_c, tmp_path):
    adcuda.manual_seed(9)
    export = check(compile_c, CausalBlock(), [adcuda.randn(2, 5, 16)], tmp_path, "embedded")
    source = open(export.source).read()
    assert source.count("/* attention:") == 1
    # the normalized input is permuted to (L, N, E) once, not once each for q, k and v
    assert source.count("/* permute: (2, 5, 16) -> (5, 2, 16) */") == 1


def test_transformer_encoder_layer(compile_c, tmp_path):
    adcuda.manual_seed(10)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=24, batch_first=True)
    check(compile_c, layer, [adcuda.randn(3, 7, 16)], tmp_path, "file")


def test_encoder_layer_under_a_constant_additive_mask(compile_c, tmp_path):
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=24, batch_first=True)

        def forward(self, x):
            # the -inf entries become weights of the export (in the weights file here), not a causal flag
            return self.layer(x, src_mask=nn.Transformer.generate_square_subsequent_mask(x.shape[1]))

    adcuda.manual_seed(14)
    export = check(compile_c, Masked(), [adcuda.randn(2, 6, 16)], tmp_path, "file")
    attention = [line for line in open(export.source) if line.startswith("/* attention:")]
    assert len(attention) == 1 and "6, 6) -> " in attention[0]  # q, k, v and the mask


# adcuda's reference forward takes the log of the fully masked row's zero sum (its logsumexp is -inf)
@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
def test_attention_masks_broadcast_and_fully_masked_rows(compile_c, tmp_path):
    class Net(nn.Module):
        def forward(self, q, k, v, m):
            allowed = m > 0.3  # (L, S) bool, broadcast over the batch; row 0 masks every key
            additive = m.unsqueeze(0) * 2.0  # (1, L, S) float, added to the scores
            return (
                F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
                F.scaled_dot_product_attention(q, k, v, attn_mask=additive, scale=0.5),
                F.scaled_dot_product_attention(q, k, v, is_causal=True),
            )

    adcuda.manual_seed(11)
    m = adcuda.rand(1, 5, 6)
    m[0, 0] = 0.0
    q, k, v = adcuda.randn(2, 3, 5, 4), adcuda.randn(2, 3, 6, 4), adcuda.randn(2, 3, 6, 7)
    export = check(compile_c, Net(), [q, k, v, m[0]], tmp_path, "embedded")
    got = reference(Net(), [q, k, v, m[0]])[0]
    assert (got[:, :, 0] == 0).all()  # the fully masked row is zeros, in adcuda and (checked above) in C
    assert export.output_shapes == [(2, 3, 5, 7)] * 3


def test_transformer_decoder_layer_with_cross_attention(compile_c, tmp_path):
    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=24, batch_first=True)

        def forward(self, x, memory):
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            return self.layer(x, memory, tgt_mask=mask, tgt_is_causal=True)

    adcuda.manual_seed(12)
    export = check(compile_c, Decoder(), [adcuda.randn(2, 5, 16), adcuda.randn(2, 7, 16)], tmp_path, "embedded")
    assert open(export.source).read().count("/* attention:") == 2  # self-attention, then over the memory


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")  # masked query rows
def test_attention_with_broadcast_batch_dims(compile_c, tmp_path):
    class Net(nn.Module):
        def forward(self, q, k, v, m):
            per_query = m[..., :1] > 0  # (2, 1, L, 1): one flag per query row, broadcast over heads and keys
            return F.scaled_dot_product_attention(q, k, v, attn_mask=per_query) + F.scaled_dot_product_attention(
                q, k, v, attn_mask=m
            )

    adcuda.manual_seed(13)
    # k shared by the batch, v by the heads, the mask by the heads
    inputs = [adcuda.randn(2, 3, 4, 5), adcuda.randn(1, 3, 6, 5), adcuda.randn(2, 1, 6, 3), adcuda.randn(2, 1, 4, 6)]
    check(compile_c, Net(), inputs, tmp_path, "embedded")


def test_constant_padding_that_crops_and_pads(compile_c, tmp_path):
    class Net(nn.Module):
        def forward(self, x):
            return F.pad(x, (-1, 2, 3, -2), value=-0.25) * 2.0

    export = check(compile_c, Net(), [adcuda.randn(2, 3, 6, 7)], tmp_path, "embedded")
    assert "/* pad:" in open(export.source).read()


def test_reflect_padding_is_refused(tmp_path):
    class Net(nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 1), mode="reflect")

    with pytest.raises(ExportError, match="reflect padding cannot be exported"):
        to_c(Net(), (adcuda.randn(1, 2, 5),), tmp_path, name="net")
