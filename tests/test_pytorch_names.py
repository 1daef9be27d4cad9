"""Names PyTorch scripts touch on their way: legacy constructors, format() of 0-d tensors,
inference_mode, accelerator, backends flags, cuda.amp aliases, cuda.manual_seed."""

import importlib

import numpy as np
import pytest

import adcuda
from adcuda.errors import DTypeError


def test_tensor_legacy_constructor_from_data_and_sizes():
    t = adcuda.Tensor([1, 2, 3])
    assert t.dtype is adcuda.float32 and t.tolist() == [1.0, 2.0, 3.0]
    assert adcuda.Tensor(np.arange(4).reshape(2, 2)).dtype is adcuda.float32
    assert adcuda.Tensor(2, 3).shape == (2, 3)
    assert adcuda.Tensor(adcuda.Size([4, 1])).shape == (4, 1)
    assert adcuda.Tensor().shape == (0,)
    x = adcuda.ones(3)
    assert adcuda.Tensor(x) is x
    assert isinstance(adcuda.Tensor([1.0]), adcuda.Tensor)


@pytest.mark.parametrize(
    "cls, dtype",
    [
        ("FloatTensor", "float32"),
        ("DoubleTensor", "float64"),
        ("LongTensor", "int64"),
        ("IntTensor", "int32"),
        ("BoolTensor", "bool"),
        ("HalfTensor", "float16"),
    ],
)
def test_typed_legacy_constructors(cls, dtype):
    made = getattr(adcuda, cls)([1, 0, 1])
    assert made.dtype is getattr(adcuda, dtype)
    assert made.tolist() == [1, 0, 1]
    assert getattr(adcuda, cls)(2, 5).shape == (2, 5)
    assert isinstance(made, getattr(adcuda, cls))
    other = adcuda.float64 if dtype != "float64" else adcuda.float32
    assert not isinstance(adcuda.zeros(1, dtype=other), getattr(adcuda, cls))


def test_legacy_constructor_errors_name_the_constructor():
    with pytest.raises(DTypeError, match="LongTensor: expected a tensor of dtype adcuda.int64, got one of"):
        adcuda.LongTensor(adcuda.ones(2))
    with pytest.raises(DTypeError, match=r"Tensor: expected sizes .* got \(float\)"):
        adcuda.Tensor(2.5)


def test_matches_pytorch_legacy_constructors():
    torch = pytest.importorskip("torch")
    for args in (([[1, 2], [3, 4]],), ((1.5, 2),), (2, 0)):
        assert adcuda.Tensor(*args).shape == tuple(torch.Tensor(*args).shape)
        if not isinstance(args[0], int):  # sizes leave the values unset
            np.testing.assert_array_equal(adcuda.Tensor(*args).numpy(), torch.Tensor(*args).numpy())
            np.testing.assert_array_equal(adcuda.LongTensor(*args).numpy(), torch.LongTensor(*args).numpy())


def test_format_of_0d_tensors():
    loss = adcuda.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235"
    assert f"{adcuda.tensor(7):>4d}" == "   7"
    assert format(adcuda.tensor([1.0, 2.0])) == str(adcuda.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        format(adcuda.tensor([1.0, 2.0]), ".2f")


def test_inference_mode_as_context_and_decorator():
    x = adcuda.ones(2, requires_grad=True)
    with adcuda.inference_mode():
        assert not adcuda.is_grad_enabled() and adcuda.is_inference_mode_enabled()
        assert not (x * 2).requires_grad
    assert adcuda.is_grad_enabled() and not adcuda.is_inference_mode_enabled()
    with adcuda.inference_mode(False):
        assert (x * 2).requires_grad

    @adcuda.inference_mode()
    def called(t):
        return t * 2

    @adcuda.inference_mode
    def bare(t):
        return t * 2

    assert not called(x).requires_grad and not bare(x).requires_grad
    assert (x * 2).requires_grad


def test_accelerator_follows_cuda():
    available = adcuda.cuda.is_available()
    assert adcuda.accelerator.is_available() == available
    assert adcuda.accelerator.device_count() == (adcuda.cuda.device_count() if available else 0)
    expected = adcuda.device("cuda") if available else None
    assert adcuda.accelerator.current_accelerator() == expected
    assert adcuda.accelerator.current_accelerator(check_available=True) == expected


def test_backends_cuda_is_the_cuda_backend_package_in_every_build():
    # one meaning whichever way it is reached and whichever build: the package adcuda/backends/cuda/
    from adcuda import _native
    from adcuda.backends import cuda

    assert cuda is importlib.import_module("adcuda.backends.cuda") is adcuda.backends.cuda
    assert cuda.__name__ == "adcuda.backends.cuda"
    assert cuda.is_built() is hasattr(_native._C, "DeviceArray")
    assert cuda.matmul.allow_tf32 is False
    if not cuda.is_built():  # no primitives, each asked-for one named in a DeviceError
        with pytest.raises(adcuda.DeviceError, match="binary: this adcuda build was built without CUDA"):
            cuda.binary  # noqa: B018
        assert not hasattr(cuda, "reduce")
        with pytest.raises(adcuda.DeviceError, match="matmul"):
            cuda.matmul(None, None)


def test_backend_flags_are_accepted():
    matmul = adcuda.backends.cuda.matmul
    assert matmul.allow_tf32 is False
    matmul.allow_tf32 = True  # accepted; adcuda's float32 matmuls stay full fp32
    try:
        assert adcuda.backends.cuda.matmul.allow_tf32 is True
        a = adcuda.tensor(np.random.default_rng(0).standard_normal((3, 3)))
        np.testing.assert_allclose((a @ a).numpy(), a.numpy() @ a.numpy(), rtol=1e-6)
    finally:
        matmul.allow_tf32 = False
    cudnn = adcuda.backends.cudnn
    assert cudnn.is_available() is False and cudnn.version() is None
    previous = cudnn.benchmark, cudnn.deterministic
    cudnn.benchmark, cudnn.deterministic = True, True
    cudnn.benchmark, cudnn.deterministic = previous
    assert cudnn.enabled is True


def test_cuda_amp_aliases():
    from adcuda.cuda.amp import GradScaler, autocast

    assert adcuda.cuda.amp.GradScaler is GradScaler
    scaler = GradScaler(init_scale=8.0, enabled=False)
    assert isinstance(scaler, adcuda.amp.GradScaler) and not scaler.is_enabled()
    with autocast(enabled=False) as region:
        assert isinstance(region, adcuda.amp.autocast) and region.device_type == "cuda"


def test_cuda_manual_seed_without_a_gpu():
    adcuda.cuda.manual_seed(5)
    first = adcuda.rand(4)
    adcuda.cuda.manual_seed_all(5)
    np.testing.assert_array_equal(adcuda.rand(4).numpy(), first.numpy())
    assert adcuda.cuda.initial_seed() == 5


def test_save_numpy_arrays_and_scalars_in_state_dicts(tmp_path):
    state = {
        "epoch": 3,
        "best": np.float64(0.25),
        "flag": np.bool_(True),
        "step": np.int64(7),
        "history": np.arange(6, dtype=np.float32).reshape(2, 3),
        "mask": np.array([True, False]),
        "transposed": np.arange(6).reshape(2, 3).T,
        "weights": {"w": adcuda.ones(2)},
    }
    adcuda.save(state, tmp_path / "ckpt.pt")
    back = adcuda.load(tmp_path / "ckpt.pt")
    assert back["epoch"] == 3 and back["best"] == 0.25 and back["flag"] == True and back["step"] == 7  # noqa: E712
    assert type(back["best"]) is np.float64 and type(back["flag"]) is np.bool_  # as pickled, as PyTorch keeps them
    for key in ("history", "mask", "transposed"):
        assert isinstance(back[key], np.ndarray) and back[key].dtype == state[key].dtype
        np.testing.assert_array_equal(back[key], state[key])
    assert back["weights"]["w"].tolist() == [1.0, 1.0]


def test_save_of_a_module_pickles_it_and_object_arrays_need_trust(tmp_path):
    from adcuda.serialization import WeightsOnlyError

    adcuda.save(adcuda.nn.Linear(2, 2), tmp_path / "model.pt")
    with pytest.raises(WeightsOnlyError, match=r"GLOBAL adcuda.nn.modules.linear.Linear.*add_safe_globals"):
        adcuda.load(tmp_path / "model.pt")
    assert type(adcuda.load(tmp_path / "model.pt", weights_only=False)) is adcuda.nn.Linear
    adcuda.save({"x": np.array([None, 1], dtype=object)}, tmp_path / "objects.pt")
    with pytest.raises(WeightsOnlyError, match="dtype other than numbers and bools"):
        adcuda.load(tmp_path / "objects.pt")
    assert adcuda.load(tmp_path / "objects.pt", weights_only=False)["x"].tolist() == [None, 1]
