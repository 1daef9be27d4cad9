"""Transformer modules: PyTorch's parameter names (state dicts load both ways) and, with torch installed,
PyTorch's outputs and gradients in eval mode, for every layer option and mask kind."""

import numpy as np
import pytest

import adcuda
from adcuda import nn
from adcuda.errors import ShapeError

try:
    import torch
except ImportError:
    torch = None
# per test, not for the module: the tests that need no oracle still run without PyTorch
needs_torch = pytest.mark.skipif(torch is None, reason="could not import 'torch' (PyTorch is the oracle here)")


def _to_adcuda(state, dtype):
    return {k: adcuda.tensor(v.detach().numpy(), dtype=dtype) for k, v in state.items()}


def _to_torch(state):
    return {k: torch.tensor(v.detach().numpy()) for k, v in state.items()}


def _pair(name, *args, dtype="float64", **kwargs):
    """The same module built by torch and by adcuda, adcuda's loaded from torch's state dict, both in
    eval mode (no dropout)."""
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype)).eval()
    ours = getattr(nn, name)(*args, **kwargs).to(getattr(adcuda, dtype))
    ours.load_state_dict(_to_adcuda(theirs.state_dict(), getattr(adcuda, dtype)))
    return ours.eval(), theirs


def _inputs(shapes, dtype, seed=1):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [adcuda.tensor(a, dtype=getattr(adcuda, dtype)).requires_grad_() for a in arrays]
    theirs = [torch.tensor(a, dtype=getattr(torch, dtype)).requires_grad_() for a in arrays]
    return ours, theirs


def _compare(ours_mod, theirs_mod, ours_in, theirs_in, ours_kw, theirs_kw, dtype, tol):
    out = ours_mod(*ours_in, **ours_kw)
    ref = theirs_mod(*theirs_in, **theirs_kw)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    rng = np.random.default_rng(5)
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(adcuda.tensor(g, dtype=getattr(adcuda, dtype)))
    ref.backward(torch.tensor(g, dtype=getattr(torch, dtype)))
    for a, t in zip(ours_in, theirs_in):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
    theirs_params = dict(theirs_mod.named_parameters())
    for name, p in ours_mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol=tol, atol=tol, err_msg=name)


def _masks(kind, L, S, N, lib, dtype):
    """attn mask (L, S) and key padding mask (N, S) of ``kind`` for ``lib``."""
    rng = np.random.default_rng(2)
    bool_attn = rng.random((L, S)) < 0.3
    bool_attn[:, 0] = False  # every query keeps a key
    padding = np.zeros((N, S), dtype=bool)
    padding[0, S - 2 :] = True
    if kind == "none":
        return {}
    if kind == "bool_attn":
        return {"attn": lib.tensor(bool_attn)}
    if kind == "float_attn":
        return {"attn": lib.tensor(rng.standard_normal((L, S)), dtype=getattr(lib, dtype))}
    if kind == "padding":
        return {"padding": lib.tensor(padding)}
    if kind == "bool_attn_and_padding":
        return {"attn": lib.tensor(bool_attn), "padding": lib.tensor(padding)}
    raise AssertionError(kind)


ENCODER_OPTIONS = {
    "post_norm_relu": dict(),
    "pre_norm_gelu": dict(norm_first=True, activation="gelu"),
    "batch_first": dict(batch_first=True),
    "callable_activation_eps": dict(activation=lambda x: x.tanh() if hasattr(x, "tanh") else None, layer_norm_eps=1e-3),
    "no_bias": dict(bias=False, norm_first=True),
}


@needs_torch
@pytest.mark.parametrize("masks", ["none", "bool_attn", "float_attn", "padding", "bool_attn_and_padding"])
@pytest.mark.parametrize("option", sorted(ENCODER_OPTIONS))
def test_encoder_layer_matches_torch(option, masks):
    kwargs = ENCODER_OPTIONS[option]
    ours, theirs = _pair("TransformerEncoderLayer", 16, 4, dim_feedforward=24, dropout=0.1, **kwargs)
    L, N = 5, 3
    shape = (N, L, 16) if kwargs.get("batch_first") else (L, N, 16)
    a_in, t_in = _inputs([shape], "float64")
    a_masks, t_masks = _masks(masks, L, L, N, adcuda, "float64"), _masks(masks, L, L, N, torch, "float64")
    _compare(
        ours,
        theirs,
        a_in,
        t_in,
        {"src_mask": a_masks.get("attn"), "src_key_padding_mask": a_masks.get("padding")},
        {"src_mask": t_masks.get("attn"), "src_key_padding_mask": t_masks.get("padding")},
        "float64",
        1e-10,
    )


@needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "bool_attn_and_padding"])
def test_decoder_layer_matches_torch(norm_first, masks):
    ours, theirs = _pair("TransformerDecoderLayer", 16, 2, dim_feedforward=20, norm_first=norm_first)
    L, S, N = 4, 6, 3
    a_in, t_in = _inputs([(L, N, 16), (S, N, 16)], "float64")
    a_tgt, t_tgt = _masks(masks, L, L, N, adcuda, "float64"), _masks(masks, L, L, N, torch, "float64")
    a_mem, t_mem = _masks(masks, L, S, N, adcuda, "float64"), _masks(masks, L, S, N, torch, "float64")

    def kw(tgt, mem):
        return {
            "tgt_mask": tgt.get("attn"),
            "tgt_key_padding_mask": tgt.get("padding"),
            "memory_mask": mem.get("attn"),
            "memory_key_padding_mask": mem.get("padding"),
        }

    _compare(ours, theirs, a_in, t_in, kw(a_tgt, a_mem), kw(t_tgt, t_mem), "float64", 1e-10)


@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_causal_matches_torch(batch_first):
    """The full encoder-decoder with the causal mask (detected as causal) and padding masks."""
    ours, theirs = _pair(
        "Transformer",
        d_model=16,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        batch_first=batch_first,
    )
    S, L, N = 6, 5, 2
    shapes = [(N, S, 16), (N, L, 16)] if batch_first else [(S, N, 16), (L, N, 16)]
    a_in, t_in = _inputs(shapes, "float64")
    a_causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=adcuda.float64)
    t_causal = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    np.testing.assert_array_equal(a_causal.numpy(), t_causal.numpy())
    padding = np.zeros((N, S), dtype=bool)
    padding[1, -1] = True
    _compare(
        ours,
        theirs,
        a_in,
        t_in,
        {
            "tgt_mask": a_causal,
            "src_key_padding_mask": adcuda.tensor(padding),
            "memory_key_padding_mask": adcuda.tensor(padding),
        },
        {
            "tgt_mask": t_causal,
            "src_key_padding_mask": torch.tensor(padding),
            "memory_key_padding_mask": torch.tensor(padding),
        },
        "float64",
        1e-10,
    )


@needs_torch
def test_encoder_stack_is_causal_float32():
    """An encoder with ``is_causal=True`` (the fused causal path) in float32, against torch's."""
    layer_args = dict(d_model=32, nhead=4, dim_feedforward=64, norm_first=True, batch_first=True, activation="gelu")
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(**layer_args), 3, norm=torch.nn.LayerNorm(32), enable_nested_tensor=False
    ).eval()
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer_args), 3, norm=nn.LayerNorm(32)).eval()
    ours.load_state_dict(_to_adcuda(theirs.state_dict(), adcuda.float32))
    a_in, t_in = _inputs([(2, 7, 32)], "float32")
    a_mask = nn.Transformer.generate_square_subsequent_mask(7)
    t_mask = torch.nn.Transformer.generate_square_subsequent_mask(7)
    _compare(
        ours,
        theirs,
        a_in,
        t_in,
        {"mask": a_mask, "is_causal": True},
        {"mask": t_mask, "is_causal": True},
        "float32",
        2e-5,
    )


@needs_torch
def test_unbatched_input_matches_torch():
    ours, theirs = _pair("TransformerEncoderLayer", 8, 2, dim_feedforward=12)
    a_in, t_in = _inputs([(5, 8)], "float64")
    _compare(ours, theirs, a_in, t_in, {}, {}, "float64", 1e-10)


@needs_torch
def test_state_dict_loads_into_torch():
    """adcuda's freshly initialised weights load into torch, and both then agree."""
    ours = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16).eval()
    theirs = torch.nn.Transformer(
        d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16
    ).eval()
    theirs.load_state_dict(_to_torch(ours.state_dict()))
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((4, 2, 8)).astype(np.float32), rng.standard_normal((3, 2, 8)).astype(np.float32)
    with torch.no_grad():
        ref = theirs(torch.tensor(src), torch.tensor(tgt)).numpy()
    with adcuda.no_grad():
        out = ours(adcuda.tensor(src), adcuda.tensor(tgt)).numpy()
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)


def test_stacks_copy_the_layer_and_xavier_initialise():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    encoder = nn.TransformerEncoder(layer, 2)
    assert encoder.layers[0] is not layer and encoder.layers[0].linear1.weight is not encoder.layers[1].linear1.weight
    np.testing.assert_array_equal(
        encoder.layers[0].linear1.weight.detach().numpy(), encoder.layers[1].linear1.weight.detach().numpy()
    )
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 16)) and w.std() > 0


def test_dropout_in_training_mode():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.5)
    x = adcuda.randn(4, 2, 8)
    layer.train()
    assert not np.allclose(layer(x).detach().numpy(), layer(x).detach().numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
    with pytest.raises(ShapeError, match="batch number"):
        model(adcuda.randn(4, 2, 8), adcuda.randn(3, 3, 8))
    with pytest.raises(ShapeError, match="d_model"):
        model(adcuda.randn(4, 2, 6), adcuda.randn(3, 2, 6))
    with pytest.raises(ValueError, match="divisible"):
        nn.TransformerEncoderLayer(10, 3)
