"""adcuda.nn: Parameter, Module bookkeeping, layers, init and clip_grad_norm_.

Gradients are checked numerically in float64 (no torch needed) and, where torch is installed, layer
outputs and parameter gradients are compared with torch's after copying torch's weights over.
"""

import copy
import inspect
import math

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck


def _np(t):
    return t.detach().numpy()


def _params_gradcheck(module, *inputs):
    """gradcheck w.r.t. the inputs that require grad and every parameter of ``module``
    (gradcheck perturbs each tensor's memory in place, so the module sees the perturbation)."""
    params = tuple(module.parameters())
    n = len(inputs)

    def fn(*args):
        out = module(*args[:n])
        return out if not isinstance(out, tuple) else tuple(o for o in out if o is not None)

    return gradcheck(fn, tuple(inputs) + params, eps=1e-6, atol=1e-6, rtol=1e-4)


# ------------------------------------------------------------------------------------------ Parameter
def test_parameter_is_a_tensor_that_requires_grad_and_ops_give_plain_tensors():
    p = nn.Parameter(adcuda.ones(2, 3))
    assert isinstance(p, nn.Parameter) and isinstance(p, adcuda.Tensor)
    assert p.requires_grad and p.is_leaf
    assert not isinstance(adcuda.ones(2), nn.Parameter)
    y = p * 2
    assert type(y) is adcuda.Tensor and not isinstance(y, nn.Parameter)
    assert not isinstance(p.detach(), nn.Parameter)
    y.sum().backward()
    np.testing.assert_allclose(_np(p.grad), np.full((2, 3), 2.0))
    assert repr(p).startswith("Parameter containing:")
    assert not nn.Parameter(adcuda.ones(2), requires_grad=False).requires_grad


def test_parameter_shares_memory_with_its_data_and_rejects_integer_grads():
    data = adcuda.zeros(3)
    p = nn.Parameter(data)
    with adcuda.no_grad():
        data.fill_(7.0)
    assert _np(p).tolist() == [7.0, 7.0, 7.0]
    with pytest.raises(TypeError, match="floating point"):
        nn.Parameter(adcuda.arange(3))
    with pytest.raises(TypeError, match="Tensor"):
        nn.Parameter([1.0, 2.0])


def test_deepcopy_of_a_module_keeps_parameters_parameters():
    m = nn.Linear(3, 2)
    c = copy.deepcopy(m)
    assert isinstance(c.weight, nn.Parameter) and c.weight is not m.weight
    np.testing.assert_array_equal(_np(c.weight), _np(m.weight))
    with adcuda.no_grad():
        c.weight.fill_(0.0)
    assert np.abs(_np(m.weight)).sum() > 0


# ------------------------------------------------------------------------------------------ Module
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(adcuda.ones(4))
        self.register_buffer("running", adcuda.zeros(4))
        self.register_buffer("scratch", adcuda.zeros(2), persistent=False)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale + self.running


def test_registration_traversal_and_names():
    b = Block()
    assert [n for n, _ in b.named_parameters()] == ["scale", "fc.weight", "fc.bias"]
    assert [n for n, _ in b.named_buffers()] == ["running", "scratch"]
    assert [n for n, _ in b.named_children()] == ["fc", "act"]
    assert [n for n, _ in b.named_modules()] == ["", "fc", "act"]
    assert list(b.state_dict()) == ["scale", "running", "fc.weight", "fc.bias"]
    assert b.get_submodule("fc") is b.fc and b.get_parameter("fc.bias") is b.fc.bias
    b.extra = 5  # plain attributes stay plain
    assert "extra" not in dict(b.named_parameters())
    del b.scale
    assert "scale" not in dict(b.named_parameters())
    with pytest.raises(AttributeError, match="Block.*no attribute 'missing'"):
        _ = b.missing


def test_assigning_the_wrong_kind_to_a_registered_name_is_an_error():
    b = Block()
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        b.scale = adcuda.ones(4)
    with pytest.raises(TypeError, match="child module 'fc'"):
        b.fc = adcuda.ones(1)
    b.running = adcuda.ones(4)  # a tensor may replace a buffer
    assert _np(b.running).tolist() == [1.0] * 4

    class Forgot(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(adcuda.ones(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Forgot()
    with pytest.raises(KeyError, match="contain"):
        b.register_buffer("a.b", adcuda.ones(1))


def test_shared_modules_and_parameters_are_listed_once():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_train_eval_apply_requires_grad_and_zero_grad():
    b = Block()
    assert b.eval() is b and not b.training and not b.fc.training
    b.train()
    assert b.fc.training
    with pytest.raises(ValueError, match="boolean"):
        b.train("yes")
    seen = []
    b.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Block"]
    b(adcuda.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in b.parameters())
    b.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0.0 for p in b.parameters())
    b.zero_grad()
    assert all(p.grad is None for p in b.parameters())
    b.requires_grad_(False)
    assert not any(p.requires_grad for p in b.parameters())


def test_forward_hooks_can_replace_inputs_and_outputs_and_be_removed():
    lin = nn.Linear(2, 2)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 100)
    out = lin(adcuda.ones(1, 2))
    np.testing.assert_allclose(_np(out), _np(lin.bias)[None] + 100, rtol=1e-6)
    assert calls == [adcuda.Size([1, 2])]
    pre.remove()
    post.remove()
    np.testing.assert_allclose(_np(lin(adcuda.zeros(1, 2))), _np(lin.bias)[None], rtol=1e-6)


def test_hooks_prepend_runs_first():
    m = nn.Identity()
    order = []
    m.register_forward_hook(lambda *a: order.append("first"))
    m.register_forward_hook(lambda *a: order.append("prepended"), prepend=True)
    m(adcuda.ones(1))
    assert order == ["prepended", "first"]


def test_repr_matches_pytorch_layout():
    m = nn.Sequential(nn.Linear(2, 3, bias=False), nn.GELU(approximate="tanh"))
    assert repr(m) == (
        "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=False)\n  (1): GELU(approximate='tanh')\n)"
    )


# ------------------------------------------------------------------------------------------ to()
def test_to_converts_in_place_and_keeps_parameter_identity():
    b = Block()
    weight = b.fc.weight
    opt = adcuda.optim.SGD(b.parameters(), lr=0.1)
    b(adcuda.randn(2, 3)).sum().backward()
    assert b.double() is b
    assert b.fc.weight is weight and isinstance(weight, nn.Parameter)
    assert weight.dtype is adcuda.float64 and weight.grad.dtype is adcuda.float64
    assert b.running.dtype is adcuda.float64
    before = _np(weight).copy()
    opt.step()  # the optimizer built before .double() still steps the same objects
    assert not np.array_equal(before, _np(weight))
    b.half()
    assert weight.dtype is adcuda.float16
    b.to(adcuda.float32)
    assert weight.dtype is adcuda.float32
    b.to("cpu", dtype=adcuda.float64)
    assert weight.dtype is adcuda.float64
    with pytest.raises(TypeError, match="floating point"):
        b.to(adcuda.int64)


def test_half_leaves_integer_buffers_alone():
    m = nn.Module()
    m.register_buffer("ids", adcuda.arange(3))
    m.register_buffer("f", adcuda.ones(2))
    m.half()
    assert m.ids.dtype is adcuda.int64 and m.f.dtype is adcuda.float16


# ------------------------------------------------------------------------------------------ state dicts
def test_state_dict_round_trip_reproduces_outputs():
    adcuda.manual_seed(0)
    a, b = Block(), Block()
    with adcuda.no_grad():
        a.running.fill_(0.5)
    x = adcuda.randn(4, 3)
    assert not np.allclose(_np(a(x)), _np(b(x)))
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    np.testing.assert_array_equal(_np(a(x)), _np(b(x)))
    sd = a.state_dict()
    assert not sd["fc.weight"].requires_grad and "scratch" not in sd
    assert a.state_dict(keep_vars=True)["fc.weight"] is a.fc.weight


def test_state_dict_shares_memory_but_loading_copies():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    sd = a.state_dict()
    with adcuda.no_grad():
        a.weight.fill_(3.0)
    assert float(sd["weight"].sum()) == 12.0
    b.load_state_dict(sd)
    with adcuda.no_grad():
        a.weight.fill_(1.0)
    assert float(b.weight.sum()) == 12.0


def test_load_state_dict_reports_missing_unexpected_and_size_mismatch():
    m = Block()
    sd = m.state_dict()
    del sd["fc.bias"]
    sd["extra.weight"] = adcuda.ones(1)
    with pytest.raises(RuntimeError) as err:
        m.load_state_dict(sd)
    msg = str(err.value)
    assert msg.startswith("Error(s) in loading state_dict for Block:")
    assert 'Missing key(s) in state_dict: "fc.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    result = m.load_state_dict(sd, strict=False)
    assert result == (["fc.bias"], ["extra.weight"])
    assert result.missing_keys == ["fc.bias"]
    bad = m.state_dict()
    bad["fc.weight"] = adcuda.ones(3, 3)
    with pytest.raises(
        RuntimeError,
        match=r"size mismatch for fc.weight: copying a param with shape "
        r"adcuda.Size\(\[3, 3\]\) from checkpoint, the shape in current "
        r"model is adcuda.Size\(\[4, 3\]\)",
    ):
        m.load_state_dict(bad, strict=False)


def test_load_state_dict_assign_replaces_tensors():
    m = nn.Linear(2, 2)
    new = {"weight": adcuda.ones(2, 2, dtype=adcuda.float64), "bias": adcuda.zeros(2, dtype=adcuda.float64)}
    m.load_state_dict(new, assign=True)
    assert isinstance(m.weight, nn.Parameter) and m.weight.dtype is adcuda.float64 and m.weight.requires_grad


# ------------------------------------------------------------------------------------------ layers
def test_linear_default_init_bounds_and_wrong_width_error():
    adcuda.manual_seed(1)
    lin = nn.Linear(64, 128)
    bound = 1 / math.sqrt(64)
    w, b = _np(lin.weight), _np(lin.bias)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound  # U(-a, a) has std a / sqrt(3)
    with pytest.raises(ValueError, match=r"Linear: input of shape \(2, 5\) does not match in_features=64"):
        lin(adcuda.ones(2, 5))
    assert lin(adcuda.ones(7, 2, 64)).shape == (7, 2, 128)
    assert nn.Linear(3, 2, bias=False).bias is None


def test_init_is_reproducible_under_manual_seed():
    adcuda.manual_seed(123)
    a = nn.Linear(5, 5)
    adcuda.manual_seed(123)
    b = nn.Linear(5, 5)
    np.testing.assert_array_equal(_np(a.weight), _np(b.weight))
    c = nn.Linear(5, 5)
    assert not np.array_equal(_np(a.weight), _np(c.weight))


def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient():
    adcuda.manual_seed(0)
    emb = nn.Embedding(10, 4, padding_idx=-1)
    assert emb.padding_idx == 9
    assert np.all(_np(emb.weight)[9] == 0) and np.abs(_np(emb.weight)[:9]).sum() > 0
    idx = adcuda.tensor([[1, 9, 1], [0, 9, 2]])
    out = emb(idx)
    assert out.shape == (2, 3, 4)
    out.sum().backward()
    g = _np(emb.weight.grad)
    np.testing.assert_allclose(g[9], 0)
    np.testing.assert_allclose(g[1], 2.0)
    np.testing.assert_allclose(g[5], 0)
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(3, 2, padding_idx=3)
    pre = nn.Embedding.from_pretrained(adcuda.ones(3, 2))
    assert not pre.weight.requires_grad


def test_layernorm_dropout_activations_flatten():
    ln = nn.LayerNorm((2, 3))
    assert _np(ln.weight).tolist() == [[1.0] * 3] * 2 and float(ln.bias.abs().sum()) == 0
    y = ln(adcuda.randn(4, 2, 3))
    np.testing.assert_allclose(_np(y).reshape(4, -1).mean(1), 0, atol=1e-6)
    assert nn.LayerNorm(3, elementwise_affine=False).weight is None

    drop = nn.Dropout(0.5)
    x = adcuda.ones(1000)
    kept = _np(drop(x))
    assert set(np.unique(kept)) <= {0.0, 2.0} and 350 < (kept > 0).sum() < 650
    drop.eval()
    np.testing.assert_array_equal(_np(drop(x)), 1.0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)

    x = adcuda.tensor([[-1.0, 0.5, 2.0]])
    np.testing.assert_allclose(_np(nn.ReLU()(x)), [[0, 0.5, 2]])
    np.testing.assert_allclose(_np(nn.Tanh()(x)), np.tanh(_np(x)), rtol=1e-6)
    np.testing.assert_allclose(_np(nn.Sigmoid()(x)), 1 / (1 + np.exp(-_np(x))), rtol=1e-6)
    np.testing.assert_allclose(_np(nn.SiLU()(x)), _np(x) / (1 + np.exp(-_np(x))), rtol=1e-6)
    np.testing.assert_allclose(_np(nn.Softmax(dim=-1)(x)).sum(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(_np(nn.GELU("tanh")(x)), _np(F.gelu(x, approximate="tanh")))
    assert nn.Identity(3, foo=1)(x) is x
    assert nn.Flatten()(adcuda.ones(2, 3, 4)).shape == (2, 12)
    assert nn.Unflatten(1, (3, 4))(adcuda.ones(2, 12)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


def test_containers():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and seq[0] is layers[0] and seq[-1] is layers[2]
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1"]
    seq.append(nn.Tanh())
    assert isinstance(seq[2], nn.Tanh)
    with pytest.raises(IndexError):
        seq[5]
    import collections

    named = nn.Sequential(collections.OrderedDict([("enc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["enc.weight", "enc.bias"] and named.enc is named[0]

    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(list(ml.parameters())) == 6
    ml.insert(0, nn.ReLU())
    assert isinstance(ml[0], nn.ReLU) and len(ml) == 4
    del ml[0]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    with pytest.raises(NotImplementedError, match="forward"):
        ml(adcuda.ones(1))

    md = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
    assert list(md.state_dict()) == ["a.weight", "a.bias"]


def test_losses():
    logits = adcuda.randn(4, 3)
    target = adcuda.tensor([0, 2, 1, 2])
    np.testing.assert_allclose(_np(nn.CrossEntropyLoss()(logits, target)), _np(F.cross_entropy(logits, target)))
    a, b = adcuda.randn(5), adcuda.randn(5)
    np.testing.assert_allclose(float(nn.MSELoss()(a, b)), float(((a - b) ** 2).mean()), rtol=1e-6)
    np.testing.assert_allclose(float(nn.L1Loss(reduction="sum")(a, b)), float((a - b).abs().sum()), rtol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


# ------------------------------------------------------------------------------------------ gradcheck
def _double(module):
    adcuda.manual_seed(7)
    return module.double()


def test_gradcheck_linear():
    lin = _double(nn.Linear(3, 2))
    x = adcuda.randn(4, 3, dtype=adcuda.float64, requires_grad=True)
    assert _params_gradcheck(lin, x)


def test_gradcheck_embedding():
    # without padding_idx: its row's gradient is zero by design, which a numerical check would flag
    emb = _double(nn.Embedding(5, 3))
    assert _params_gradcheck(emb, adcuda.tensor([[1, 0, 4], [4, 4, 2]]))


def test_gradcheck_layernorm():
    ln = _double(nn.LayerNorm(4))
    with adcuda.no_grad():
        ln.weight.copy_(adcuda.randn(4, dtype=adcuda.float64))
        ln.bias.copy_(adcuda.randn(4, dtype=adcuda.float64))
    x = adcuda.randn(3, 4, dtype=adcuda.float64, requires_grad=True)
    assert _params_gradcheck(ln, x)


def test_gradcheck_sequential_mlp():
    mlp = _double(nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)))
    x = adcuda.randn(2, 3, dtype=adcuda.float64, requires_grad=True)
    assert _params_gradcheck(mlp, x)


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradcheck_multihead_attention(need_weights):
    mha = _double(nn.MultiheadAttention(4, 2, batch_first=True))
    with adcuda.no_grad():
        mha.in_proj_bias.copy_(adcuda.randn(12, dtype=adcuda.float64) * 0.1)
    q = adcuda.randn(2, 3, 4, dtype=adcuda.float64, requires_grad=True)
    kv = adcuda.randn(2, 2, 4, dtype=adcuda.float64, requires_grad=True)
    mask = adcuda.tensor([[False, False], [False, True]])

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q, kv):
            return self.mha(q, kv, kv, key_padding_mask=mask, need_weights=need_weights)

    assert _params_gradcheck(Wrapped(), q, kv)


# ------------------------------------------------------------------------------------------ MHA semantics
def test_multihead_attention_shapes_masks_and_errors():
    adcuda.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2)
    x = adcuda.randn(5, 3, 8)  # (L, N, E): sequence first by default
    out, w = mha(x, x, x)
    assert out.shape == (5, 3, 8) and w.shape == (3, 5, 5)
    np.testing.assert_allclose(_np(w).sum(-1), 1.0, rtol=1e-5)
    out2, w2 = mha(x, x, x, average_attn_weights=False)
    assert w2.shape == (3, 2, 5, 5)
    np.testing.assert_allclose(_np(out2), _np(out), rtol=1e-5, atol=1e-6)
    causal = adcuda.triu(adcuda.ones(5, 5, dtype=adcuda.bool), 1)
    _, wc = mha(x, x, x, attn_mask=causal)
    assert np.all(_np(wc)[:, causal.numpy()] == 0)
    fused, none = mha(x, x, x, attn_mask=causal, need_weights=False, is_causal=True)
    assert none is None
    explicit, _ = mha(x, x, x, attn_mask=causal)
    np.testing.assert_allclose(_np(fused), _np(explicit), rtol=1e-5, atol=1e-6)
    unbatched, wu = mha(x[:, 0], x[:, 0], x[:, 0])
    assert unbatched.shape == (5, 8) and wu.shape == (5, 5)
    np.testing.assert_allclose(_np(unbatched), _np(out)[:, 0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="embedding dimension of 8"):
        mha(adcuda.randn(5, 3, 7), x, x)
    with pytest.raises(ValueError, match="attn_mask"):
        mha(x, x, x, attn_mask=adcuda.zeros(4, 4))
    with pytest.raises(ValueError, match="need attn_mask"):
        mha(x, x, x, is_causal=True)
    names = [n for n, _ in mha.named_parameters()]
    assert names == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]


# ------------------------------------------------------------------------------------------ nn.init
def test_init_functions():
    w = adcuda.empty(200, 300)
    assert nn.init.calculate_gain("relu") == math.sqrt(2.0)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    assert nn.init._calculate_fan_in_and_fan_out(adcuda.empty(4, 3, 5)) == (15, 20)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(adcuda.empty(3))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_uniform_(w, mode="fan_avg")
    a = math.sqrt(6 / 500)
    nn.init.xavier_uniform_(w)
    assert np.abs(_np(w)).max() <= a and np.abs(_np(w)).max() > 0.95 * a
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(_np(w).std() - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300) * 5
    nn.init.xavier_normal_(w, gain=2.0)
    assert abs(_np(w).std() - 2 * math.sqrt(2 / 500)) < 0.05 * 2 * math.sqrt(2 / 500)
    nn.init.normal_(w, 3.0, 0.5)
    assert abs(_np(w).mean() - 3.0) < 0.01 and abs(_np(w).std() - 0.5) < 0.01
    nn.init.uniform_(w, -2.0, -1.0)
    assert _np(w).min() >= -2.0 and _np(w).max() <= -1.0
    nn.init.constant_(w, 0.25)
    assert np.all(_np(w) == 0.25)
    nn.init.zeros_(w)
    assert not _np(w).any()
    p = nn.Parameter(adcuda.empty(3, 3, dtype=adcuda.float16))
    nn.init.ones_(p)  # in place on a leaf that requires grad: no autograd error, no graph
    assert p.grad_fn is None and p.dtype is adcuda.float16 and np.all(_np(p) == 1)


def test_init_gains_match_torch():
    torch = pytest.importorskip("torch")
    for name, param in [
        ("linear", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.3),
        ("selu", None),
        ("sigmoid", None),
    ]:
        assert nn.init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


# ------------------------------------------------------------------------------------------ clipping
def test_clip_grad_norm_closed_form():
    a = nn.Parameter(adcuda.zeros(2))
    b = nn.Parameter(adcuda.zeros(1))
    a.grad = adcuda.tensor([3.0, 0.0])
    b.grad = adcuda.tensor([4.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert float(total) == pytest.approx(5.0)
    np.testing.assert_allclose(_np(a.grad), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(_np(b.grad), [0.8], rtol=1e-5)
    total = nn.utils.clip_grad_norm_([a, b], max_norm=10.0)  # below the limit: unchanged
    assert float(total) == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(_np(a.grad), [0.6, 0.0], rtol=1e-5)
    total = nn.utils.clip_grad_norm_(a, max_norm=0.3, norm_type="inf")
    assert float(total) == pytest.approx(0.6, rel=1e-5)
    np.testing.assert_allclose(_np(a.grad), [0.3, 0.0], rtol=1e-4)
    assert float(nn.utils.clip_grad_norm_([nn.Parameter(adcuda.ones(1))], 1.0)) == 0.0


def test_clip_grad_norm_half_grads_do_not_overflow_and_nonfinite_errors():
    p = nn.Parameter(adcuda.zeros(4, dtype=adcuda.float16))
    p.grad = adcuda.full((4,), 60000.0, dtype=adcuda.float16)  # squares overflow fp16
    total = nn.utils.clip_grad_norm_([p], 1.0)
    assert float(total) == pytest.approx(120000.0, rel=1e-3)
    np.testing.assert_allclose(_np(p.grad).astype(np.float32), 0.5, rtol=1e-3)
    p.grad = adcuda.tensor([float("nan"), 1.0, 1.0, 1.0], dtype=adcuda.float16)
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    q = nn.Parameter(adcuda.zeros(2))
    q.grad = adcuda.tensor([-3.0, 2.0])
    nn.utils.clip_grad_value_([q], 1.5)
    np.testing.assert_allclose(_np(q.grad), [-1.5, 1.5])


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s) for s in [(3, 4), (5,), (2, 2, 2)]]
    for norm_type in (2.0, 1.0, 3.0, float("inf")):
        tp = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
        ap = [nn.Parameter(adcuda.zeros(*g.shape, dtype=adcuda.float64)) for g in grads]
        for t, a, g in zip(tp, ap, grads):
            t.grad = torch.tensor(g)
            a.grad = adcuda.tensor(g)
        tt = torch.nn.utils.clip_grad_norm_(tp, 0.7, norm_type=norm_type)
        at = nn.utils.clip_grad_norm_(ap, 0.7, norm_type=norm_type)
        assert float(at) == pytest.approx(float(tt), rel=1e-12)
        for t, a in zip(tp, ap):
            np.testing.assert_allclose(_np(a.grad), t.grad.numpy(), rtol=1e-12)


# ------------------------------------------------------------------------------------------ torch parity
def _load_from_torch(adcuda_module, torch_module):
    sd = {k: adcuda.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    adcuda_module.load_state_dict(sd)


def _compare_with_torch(torch, tmod, amod, t_inputs, rtol=1e-10, atol=1e-12, call=None):
    call = call or (lambda m, *xs: m(*xs))
    _load_from_torch(amod, tmod)
    a_inputs = [adcuda.tensor(x.detach().numpy(), requires_grad=x.requires_grad) for x in t_inputs]
    t_out, a_out = call(tmod, *t_inputs), call(amod, *a_inputs)
    if isinstance(t_out, tuple):
        t_out, a_out = t_out[0], a_out[0]
    np.testing.assert_allclose(_np(a_out), t_out.detach().numpy(), rtol=rtol, atol=atol)
    seed = np.random.default_rng(0).standard_normal(tuple(t_out.shape))
    t_out.backward(torch.tensor(seed))
    a_out.backward(adcuda.tensor(seed))
    t_params = dict(tmod.named_parameters())
    for name, p in amod.named_parameters():
        np.testing.assert_allclose(_np(p.grad), t_params[name].grad.numpy(), rtol=rtol, atol=atol, err_msg=name)
    for a, t in zip(a_inputs, t_inputs):
        if t.requires_grad:
            np.testing.assert_allclose(_np(a.grad), t.grad.numpy(), rtol=rtol, atol=atol)


def test_layers_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    f64 = torch.float64
    x = torch.randn(4, 6, dtype=f64, requires_grad=True)
    _compare_with_torch(torch, torch.nn.Linear(6, 3, dtype=f64), nn.Linear(6, 3, dtype=adcuda.float64), [x])
    x = torch.randn(2, 3, 6, dtype=f64, requires_grad=True)
    _compare_with_torch(torch, torch.nn.LayerNorm(6, dtype=f64), nn.LayerNorm(6, dtype=adcuda.float64), [x])
    idx = torch.tensor([[0, 3, 3], [1, 2, 0]])
    _compare_with_torch(
        torch,
        torch.nn.Embedding(4, 5, padding_idx=3, dtype=f64),
        nn.Embedding(4, 5, padding_idx=3, dtype=adcuda.float64),
        [idx],
    )
    tm = torch.nn.Sequential(
        torch.nn.Linear(6, 8),
        torch.nn.GELU(),
        torch.nn.LayerNorm(8),
        torch.nn.SiLU(),
        torch.nn.Linear(8, 8),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(8, 2),
    ).double()
    am = nn.Sequential(
        nn.Linear(6, 8),
        nn.GELU(),
        nn.LayerNorm(8),
        nn.SiLU(),
        nn.Linear(8, 8),
        nn.GELU(approximate="tanh"),
        nn.Linear(8, 2),
    ).double()
    x = torch.randn(5, 6, dtype=f64, requires_grad=True)
    _compare_with_torch(torch, tm, am, [x])


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(batch_first=True),
        dict(bias=False),
        dict(add_bias_kv=True, add_zero_attn=True),
        dict(kdim=3, vdim=5),
    ],
)
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_matches_torch(options, need_weights):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    E, H, L, S, N = 8, 2, 4, 5, 3
    tm = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **options)
    am = nn.MultiheadAttention(E, H, dtype=adcuda.float64, **options)
    shape = (lambda length, d: (N, length, d)) if options.get("batch_first") else (lambda length, d: (length, N, d))
    q = torch.randn(*shape(L, E), dtype=torch.float64, requires_grad=True)
    k = torch.randn(*shape(S, options.get("kdim", E)), dtype=torch.float64, requires_grad=True)
    v = torch.randn(*shape(S, options.get("vdim", E)), dtype=torch.float64, requires_grad=True)
    padding = torch.zeros(N, S, dtype=torch.bool)
    padding[0, -2:] = True
    attn = torch.rand(L, S, generator=torch.Generator().manual_seed(1)) > 0.7
    attn[:, 0] = False

    def call(m, q, k, v):
        tensor_lib = torch if isinstance(q, torch.Tensor) else adcuda
        kpm = tensor_lib.tensor(padding.numpy())
        mask = tensor_lib.tensor(attn.numpy())
        return m(q, k, v, key_padding_mask=kpm, attn_mask=mask, need_weights=need_weights, average_attn_weights=False)

    _compare_with_torch(torch, tm, am, [q, k, v], call=call)


def test_multihead_self_attention_weights_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    tm = torch.nn.MultiheadAttention(6, 3, batch_first=True, dtype=torch.float64)
    am = nn.MultiheadAttention(6, 3, batch_first=True, dtype=adcuda.float64)
    _load_from_torch(am, tm)
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    mask = torch.full((4, 4), float("-inf"), dtype=torch.float64).triu(1)
    t_out, t_w = tm(x, x, x, attn_mask=mask)
    ax = adcuda.tensor(x.numpy())
    a_out, a_w = am(ax, ax, ax, attn_mask=adcuda.tensor(mask.numpy()))
    np.testing.assert_allclose(_np(a_out), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(a_w), t_w.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_activation_modules_pass_inplace_by_position_as_pytorch():
    # nn.LeakyReLU calls F.leaky_relu(input, slope, inplace), as PyTorch's does: inplace is
    # positional in F's signature after the op's own arguments.
    x = adcuda.tensor([-2.0, 0.5, 3.0])
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(x).numpy(), [-0.2, 0.5, 3.0], rtol=1e-6)
    y = x.clone()
    out = nn.LeakyReLU(0.1, inplace=True)(y)
    assert out is y
    np.testing.assert_allclose(y.numpy(), [-0.2, 0.5, 3.0], rtol=1e-6)
    z = x.clone()
    F.leaky_relu(z, 0.2, True)
    np.testing.assert_allclose(z.numpy(), [-0.4, 0.5, 3.0], rtol=1e-6)
    assert list(inspect.signature(F.leaky_relu).parameters) == ["input", "negative_slope", "inplace"]
    with pytest.raises(TypeError):
        F.leaky_relu(x, 0.2, True, 5)
