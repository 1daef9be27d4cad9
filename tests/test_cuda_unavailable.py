"""adcuda.cuda where no device is usable (no GPU, no driver, or a build without CUDA), and on a GPU."""

import os
import pathlib
import subprocess
import sys

import pytest

import adcuda
import adcuda.cuda
from adcuda import _info, _native
from adcuda.errors import DeviceError

no_device = pytest.mark.skipif(adcuda.cuda.device_count() > 0, reason="a CUDA device is visible")
needs_cuda = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not adcuda.cuda.is_available(), reason=f"CUDA is not usable: {adcuda.cuda.unavailable_reason()}"
    ),
]


@no_device
def test_not_available_and_says_why():
    assert adcuda.cuda.is_available() is False
    assert adcuda.cuda.device_count() == 0
    reason = adcuda.cuda.unavailable_reason()
    assert isinstance(reason, str) and reason.strip()


@no_device
def test_require_cuda_names_the_op_and_the_reason():
    with pytest.raises(DeviceError) as caught:
        adcuda.cuda._require_cuda("add")
    message = str(caught.value)
    assert message.startswith("add: device 'cuda' requested but CUDA is not available: ")
    assert adcuda.cuda.unavailable_reason() in message
    assert isinstance(caught.value, RuntimeError)


@no_device
@pytest.mark.parametrize(
    "call, op",
    [
        (lambda: adcuda.cuda.get_device_name(), "get_device_name"),
        (lambda: adcuda.cuda.get_device_name(0), "get_device_name"),
        (lambda: adcuda.cuda.get_device_properties("cuda:0"), "get_device_properties"),
        (lambda: adcuda.cuda.get_device_capability(), "get_device_capability"),
        (lambda: adcuda.cuda.current_device(), "current_device"),
        (lambda: adcuda.cuda.set_device(0), "set_device"),
        (lambda: adcuda.cuda.synchronize(), "synchronize"),
    ],
)
def test_device_calls_raise_device_error(call, op):
    with pytest.raises(DeviceError, match=f"^{op}: device 'cuda' requested but CUDA is not available"):
        call()


@no_device
def test_native_calls_raise_cuda_error_instead_of_aborting():
    C = _native._C
    if C is None or not C.build_info()["cuda_compiled"]:
        pytest.skip("needs a CUDA build of adcuda._C")
    assert issubclass(C.CudaError, RuntimeError)
    count, reason = C.cuda_device_count()
    assert count == 0 and reason
    with pytest.raises(C.CudaError) as caught:
        C.cuda_device_properties(0)
    error = caught.value
    assert error.error_name.startswith("cudaError") and error.code > 0
    assert error.call == "cudaGetDeviceProperties(&prop, index)"
    assert error.location.startswith("kernels/runtime/device.cu:")
    assert error.error_name in str(error) and error.description in str(error)
    with pytest.raises(C.CudaError):
        C.cuda_synchronize()


def test_hidden_devices_make_cuda_unavailable():
    """Runs on a GPU machine too: with CUDA_VISIBLE_DEVICES empty the runtime sees no device."""
    code = "import adcuda.cuda as c\nprint(c.is_available(), c.device_count())\nprint(c.unavailable_reason())\n"
    package_parent = str(pathlib.Path(next(iter(adcuda.__path__))).parent)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=package_parent)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    availability, reason = result.stdout.splitlines()
    assert availability == "False 0"
    assert reason.strip() and reason != "None"


@pytest.mark.parametrize("bad", [-1, 10_000, "cuda:10000"])
def test_invalid_device_index_is_a_device_error(bad):
    with pytest.raises(DeviceError):
        adcuda.cuda.get_device_properties(bad)


@pytest.mark.parametrize("not_cuda", ["cpu", "tpu"])
def test_non_cuda_device_is_a_device_error(not_cuda):
    with pytest.raises(DeviceError):
        adcuda.cuda.get_device_name(not_cuda)


class TestWithDevice:
    pytestmark = needs_cuda

    def test_available(self):
        assert adcuda.cuda.unavailable_reason() is None
        assert adcuda.cuda.device_count() >= 1

    def test_properties(self):
        props = adcuda.cuda.get_device_properties(0)
        assert props.name and props.name == adcuda.cuda.get_device_name()
        assert props.total_memory > 2**30 and props.multi_processor_count > 0
        assert adcuda.cuda.get_device_capability("cuda:0") == (props.major, props.minor)
        assert f"name='{props.name}'" in repr(props)

    def test_set_current_and_synchronize(self):
        adcuda.cuda.set_device(0)
        assert adcuda.cuda.current_device() == 0
        adcuda.cuda.synchronize()
        adcuda.cuda.synchronize("cuda:0")

    def test_invalid_index_names_the_count(self):
        count = adcuda.cuda.device_count()
        with pytest.raises(DeviceError, match=f"invalid CUDA device index {count}; {count} device"):
            adcuda.cuda.get_device_properties(count)

    def test_info_reports_the_device(self):
        facts = _info.info(as_dict=True)
        assert facts["running_on"].startswith("cuda:")
        assert facts["cuda_driver_version"]
        assert facts["devices"][0]["build_runs_on_device"] is not False
