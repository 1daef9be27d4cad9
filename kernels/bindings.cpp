// adcuda._C: the module's entry point, its build facts and the device query. With the rest of
// kernels/bindings/ (compiled in a CUDA build only, see bindings/registry.h) these are the only native
// files that know Python; everything else under kernels/ is plain C++/CUDA.
// Calls that may block on the GPU or on CUDA initialisation release the GIL; C++ exceptions become
// Python exceptions, never an abort: adcuda::CudaError -> adcuda._C.CudaError (a RuntimeError),
// OutOfMemoryError -> adcuda.cuda.OutOfMemoryError, ForkedProcessError -> adcuda.cuda.BadForkError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "adcuda/build_config.h"
#include "functors.cuh"
#include "host/torch_order_sum.h"
#include "runtime/device.h"
#include "runtime/errors.h"

#if ADCUDA_CUDA_COMPILED
#include "bindings/registry.h"
#endif

namespace py = pybind11;

namespace adcuda::host {
void bind_attention(py::module_& m);    // kernels/host/attention.cpp
void bind_convolution(py::module_& m);  // kernels/host/convolution.cpp
void bind_elementwise(py::module_& m);  // kernels/host/elementwise.cpp
void bind_gemm(py::module_& m);         // kernels/host/gemm.cpp
void bind_norm(py::module_& m);         // kernels/host/norm.cpp
void bind_norm_running(py::module_& m);  // kernels/host/norm_running.cpp
void bind_optim(py::module_& m);        // kernels/host/optim.cpp
void bind_pooling(py::module_& m);      // kernels/host/pooling.cpp
void bind_recurrent(py::module_& m);    // kernels/host/recurrent.cpp
void bind_random(py::module_& m);       // kernels/host/random.cpp
void bind_reduce(py::module_& m);       // kernels/host/reduce.cpp
void bind_softmax_loss(py::module_& m);  // kernels/host/softmax_loss.cpp
void bind_sort(py::module_& m);         // kernels/host/sort.cpp
void bind_index(py::module_& m);        // kernels/host/index.cpp
void bind_layout(py::module_& m);       // kernels/host/layout.cpp
}  // namespace adcuda::host

namespace {

py::list split_architectures(const std::string& joined) {
  py::list architectures;
  std::size_t start = 0;
  while (start < joined.size()) {
    std::size_t end = joined.find(';', start);
    if (end == std::string::npos) end = joined.size();
    if (end > start) architectures.append(joined.substr(start, end - start));
    start = end + 1;
  }
  return architectures;
}

py::dict build_info() {
  py::dict info;
  info["cuda_compiled"] = static_cast<bool>(ADCUDA_CUDA_COMPILED);
  info["cuda_emulated"] = static_cast<bool>(ADCUDA_CUDA_EMULATED);
  info["cuda_version"] = ADCUDA_CUDA_COMPILED ? py::object(py::str(ADCUDA_CUDA_VERSION)) : py::object(py::none());
  info["cuda_architectures"] = split_architectures(ADCUDA_CUDA_ARCHITECTURES);
  info["compiler"] = ADCUDA_COMPILER;
  info["build_type"] = ADCUDA_BUILD_TYPE;
  return info;
}

py::dict properties_dict(const adcuda::DeviceProperties& p) {
  py::dict d;
  d["name"] = p.name;
  d["major"] = p.major;
  d["minor"] = p.minor;
  d["total_memory"] = p.total_memory;
  d["multi_processor_count"] = p.multi_processor_count;
  d["warp_size"] = p.warp_size;
  d["max_threads_per_block"] = p.max_threads_per_block;
  d["shared_memory_per_block"] = p.shared_memory_per_block;
  d["l2_cache_size"] = p.l2_cache_size;
  d["pci_domain_id"] = p.pci_domain_id;
  d["pci_bus_id"] = p.pci_bus_id;
  d["pci_device_id"] = p.pci_device_id;
  return d;
}

// Raises the exception class `name` of adcuda.cuda.errors (defined in Python, so that a build without
// CUDA has the same classes), or `fallback` if that module cannot be imported.
void raise_python_error(const char* name, const char* message, PyObject* fallback) {
  py::object type = py::reinterpret_borrow<py::object>(fallback);
  try {
    type = py::module_::import("adcuda.cuda.errors").attr(name);
  } catch (py::error_already_set&) {
    // keep the fallback: the message still says what happened
  }
  PyErr_SetString(type.ptr(), message);
}

void register_cuda_error(py::module_& m) {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> cuda_error_type;
  cuda_error_type.call_once_and_store_result([&m]() {
    py::object type = py::exception<adcuda::CudaError>(m, "CudaError", PyExc_RuntimeError);
    type.attr("__doc__") =
        "A CUDA runtime call failed. Attributes: code (the cudaError_t value), error_name "
        "(e.g. 'cudaErrorMemoryAllocation'), description (CUDA's text), call (the failed call) and "
        "location (source file:line).";
    return type;
  });
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const adcuda::CudaError& e) {
      py::object type = cuda_error_type.get_stored();
      py::object error = type(e.what());
      error.attr("code") = e.code();
      error.attr("error_name") = e.error_name();
      error.attr("description") = e.description();
      error.attr("call") = e.call();
      error.attr("location") = e.location();
      PyErr_SetObject(type.ptr(), error.ptr());
    } catch (const adcuda::OutOfMemoryError& e) {
      raise_python_error("OutOfMemoryError", e.what(), PyExc_RuntimeError);
    } catch (const adcuda::ForkedProcessError& e) {
      raise_python_error("BadForkError", e.what(), PyExc_RuntimeError);
    }
  });
}

// The CPU backend's sum of a small contiguous row (adcuda/backends/cpu/reduce.py): a 1-d float32 or
// float64 array of at least one element (the caller checks), summed in PyTorch's order, as a float.
template <typename T>
double host_torch_order_sum(const py::array_t<T, py::array::c_style>& row) {
  return static_cast<double>(adcuda::host::torch_order_sum(row.data(), static_cast<std::size_t>(row.size())));
}

// The CPU backend's gamma family, erfinv and i0 (adcuda/backends/cpu/_special.py): the CUDA kernels' own
// functors (functors.cuh's special::), run over a contiguous float32/float64 array on the host, so the
// formula lives once; a new array of the input's shape and dtype, computed in double as on the device.
template <typename T, typename F>
py::array_t<T> map_unary(const py::array_t<T, py::array::c_style>& x) {
  py::array_t<T> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  const T* in = x.data();
  T* result = out.mutable_data();
  const F f{};
  const py::ssize_t n = x.size();
  {
    py::gil_scoped_release release;
    for (py::ssize_t i = 0; i < n; ++i) result[i] = f(in[i]);
  }
  return out;
}

template <typename T>
py::array_t<T> host_special_unary(const std::string& op, const py::array_t<T, py::array::c_style>& x) {
  namespace m = adcuda::math;
  if (op == "lgamma") return map_unary<T, m::Lgamma>(x);
  if (op == "digamma") return map_unary<T, m::Digamma>(x);
  if (op == "trigamma") return map_unary<T, m::Trigamma>(x);
  if (op == "erfinv") return map_unary<T, m::Erfinv>(x);
  if (op == "i0") return map_unary<T, m::I0>(x);
  throw py::value_error("host_special_unary: unknown op '" + op + "'");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() =
      "adcuda's native runtime: CUDA device query and control, and in a CUDA build the runtime (DeviceArray, "
      "streams, events, caching allocator, pinned pool, copies, interop) and the kernels.";
  register_cuda_error(m);

  // no array_t conversion (noconvert): a row of another dtype is the caller's error, never a silent copy
  m.def("host_torch_order_sum", &host_torch_order_sum<float>, py::arg("row").noconvert());
  m.def("host_torch_order_sum", &host_torch_order_sum<double>, py::arg("row").noconvert(),
        "The sum of a contiguous 1-d float32/float64 row in PyTorch's CPU order of additions (a float).");

  m.def("host_special_unary", &host_special_unary<float>, py::arg("op"), py::arg("x").noconvert());
  m.def("host_special_unary", &host_special_unary<double>, py::arg("op"), py::arg("x").noconvert(),
        "lgamma, digamma, trigamma, erfinv or i0 of a contiguous float32/float64 array, with the CUDA kernels' "
        "functors, computed in float64 (a new array of x's shape and dtype).");
  m.def("build_info", &build_info,
        "How this module was built: cuda_compiled, cuda_version, cuda_architectures, compiler, build_type.");

  m.def(
      "cuda_device_count",
      []() {
        adcuda::DeviceCount result;
        {
          py::gil_scoped_release release;
          result = adcuda::device_count();
        }
        return py::make_tuple(result.count, result.unavailable_reason);
      },
      "(count, reason): the number of CUDA devices, and why there is none ('' when count > 0). "
      "Never raises for a missing driver or GPU.");

  m.def(
      "cuda_device_properties",
      [](int index) {
        adcuda::DeviceProperties properties;
        {
          py::gil_scoped_release release;
          properties = adcuda::device_properties(index);
        }
        return properties_dict(properties);
      },
      py::arg("index"), "Properties of CUDA device `index` as a dict; raises CudaError.");

  m.def("cuda_driver_version", &adcuda::driver_version, py::call_guard<py::gil_scoped_release>(),
        "The CUDA version the installed driver supports (e.g. 13000), 0 without a driver.");
  m.def("cuda_runtime_version", &adcuda::runtime_version, py::call_guard<py::gil_scoped_release>(),
        "The version of the CUDA runtime linked into this module (e.g. 13000), 0 in a build without CUDA.");
  m.def("cuda_current_device", &adcuda::current_device, py::call_guard<py::gil_scoped_release>(),
        "The calling thread's current CUDA device.");
  m.def("cuda_set_device", &adcuda::set_device, py::arg("index"), py::call_guard<py::gil_scoped_release>(),
        "Make `index` the calling thread's current CUDA device.");
  m.def("cuda_synchronize", &adcuda::synchronize, py::call_guard<py::gil_scoped_release>(),
        "Wait for all work on the current CUDA device to finish.");

  adcuda::host::bind_attention(m);
  adcuda::host::bind_convolution(m);
  adcuda::host::bind_elementwise(m);
  adcuda::host::bind_gemm(m);
  adcuda::host::bind_norm(m);
  adcuda::host::bind_norm_running(m);
  adcuda::host::bind_optim(m);
  adcuda::host::bind_pooling(m);
  adcuda::host::bind_recurrent(m);
  adcuda::host::bind_random(m);
  adcuda::host::bind_reduce(m);
  adcuda::host::bind_softmax_loss(m);
  adcuda::host::bind_sort(m);
  adcuda::host::bind_index(m);
  adcuda::host::bind_layout(m);
#if ADCUDA_CUDA_COMPILED
  adcuda::bindings::bind_registered(m);
#endif
}
