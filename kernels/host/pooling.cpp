// The CPU backend's max and average pooling forwards (adcuda/backends/cpu/pooling.py) over contiguous
// float32/float64 NCHW arrays: the CUDA kernels' window rules (pooling_windows.h), one output after
// another. NumPy pools as a whole-array pass per kernel tap plus the passes that pick PyTorch's index
// and NaN rules: a dozen calls of a microsecond each on the small arrays of a per-op call, where this is
// one. The NumPy path stays the reference (tests/test_cpu_fast_paths.py compares the two) and serves
// the other dtypes. Built in every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "pooling_windows.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;
using Pair = std::array<Index, 2>;
using pooling::Window;

template <typename T>
T identity(T v) {
  return v;
}

template <typename T>
py::array_t<T> input_of(const py::array& x_any, const char* op) {
  auto x = py::array_t<T, py::array::c_style>::ensure(x_any);
  if (!x || x.ndim() != 4) throw std::invalid_argument(std::string(op) + ": expected a C-contiguous (N, C, H, W) array");
  return x;
}

template <typename T>
py::array_t<T> planes_out(const py::array_t<T>& x, Index out_h, Index out_w) {
  return py::array_t<T>(std::vector<py::ssize_t>{x.shape(0), x.shape(1), out_h, out_w});
}

// values and int64 flat (h * W + w) indices of each window's maximum; ``window(oh, ow)`` says which.
template <typename T, typename WindowOf>
py::tuple max_pool(const py::array& x_any, Index out_h, Index out_w, Index dh, Index dw, WindowOf window) {
  auto x = input_of<T>(x_any, "cpu_max_pool2d");
  auto values = planes_out<T>(x, out_h, out_w);
  py::array_t<std::int64_t> indices(std::vector<py::ssize_t>{x.shape(0), x.shape(1), out_h, out_w});
  const Index planes = x.shape(0) * x.shape(1), h = x.shape(2), w = x.shape(3);
  const T* in = x.data();
  T* value = values.mutable_data();
  std::int64_t* index = indices.mutable_data();
  {
    py::gil_scoped_release release;
    for (Index p = 0; p < planes; ++p) {
      const T* plane = in + p * h * w;
      for (Index oh = 0; oh < out_h; ++oh) {
        for (Index ow = 0; ow < out_w; ++ow, ++value, ++index) {
          pooling::window_max<T>(plane, w, window(oh, ow), dh, dw, -std::numeric_limits<T>::infinity(), identity<T>,
                                 value, index);
        }
      }
    }
  }
  return py::make_tuple(values, indices);
}

template <typename T, bool kAdaptive>
py::array_t<T> avg_pool(const py::array& x_any, const pooling::AvgGeometry& g) {
  auto x = input_of<T>(x_any, "cpu_avg_pool2d");
  auto out = planes_out<T>(x, g.out_h, g.out_w);
  const T* in = x.data();
  T* y = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (Index p = 0; p < g.planes; ++p) {
      for (Index oh = 0; oh < g.out_h; ++oh) {
        for (Index ow = 0; ow < g.out_w; ++ow) {
          *y++ = pooling::window_mean<T>(in + p * g.h * g.w, g.w, pooling::avg_window<kAdaptive>(g, oh, ow),
                                         identity<T>);
        }
      }
    }
  }
  return out;
}

bool is_double(const py::array& x, const char* op) {
  if (py::isinstance<py::array_t<double>>(x)) return true;
  if (py::isinstance<py::array_t<float>>(x)) return false;
  throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 array");
}

pooling::AvgGeometry avg_geometry(const py::array& x, Pair out, Pair kernel, Pair stride, Pair padding,
                                  bool count_include_pad, Index divisor_override) {
  if (x.ndim() != 4) throw std::invalid_argument("cpu_avg_pool2d: expected an (N, C, H, W) array");
  return {x.shape(0) * x.shape(1), x.shape(2), x.shape(3), out[0],     out[1],           kernel[0],
          kernel[1],               stride[0],  stride[1],  padding[0], padding[1], count_include_pad,
          divisor_override};
}

}  // namespace

void bind_pooling(py::module_& m) {
  m.def(
      "cpu_max_pool2d",
      [](const py::array& x, Pair kernel, Pair stride, Pair padding, Pair dilation, Pair out) {
        if (x.ndim() != 4) throw std::invalid_argument("cpu_max_pool2d: expected an (N, C, H, W) array");
        const pooling::PoolGeometry g{x.shape(0) * x.shape(1), x.shape(2), x.shape(3), out[0],     out[1],
                                      kernel[0],               kernel[1],  stride[0],  stride[1], padding[0],
                                      padding[1],              dilation[0], dilation[1]};
        const auto window = [&g](Index oh, Index ow) { return pooling::max_window(g, oh, ow); };
        return is_double(x, "cpu_max_pool2d") ? max_pool<double>(x, out[0], out[1], g.dilation_h, g.dilation_w, window)
                                              : max_pool<float>(x, out[0], out[1], g.dilation_h, g.dilation_w, window);
      },
      py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("out"),
      "(values, int64 flat indices) of max pooling a C-contiguous float32/float64 (N, C, H, W) array over windows "
      "of kernel, stride, padding (never chosen) and dilation, to out (Ho, Wo).");
  m.def(
      "cpu_adaptive_max_pool2d",
      [](const py::array& x, Pair out) {
        if (x.ndim() != 4) throw std::invalid_argument("cpu_adaptive_max_pool2d: expected an (N, C, H, W) array");
        const Index h = x.shape(2), w = x.shape(3);
        const auto window = [=](Index oh, Index ow) { return pooling::adaptive_window(h, w, out[0], out[1], oh, ow); };
        return is_double(x, "cpu_adaptive_max_pool2d") ? max_pool<double>(x, out[0], out[1], 1, 1, window)
                                                       : max_pool<float>(x, out[0], out[1], 1, 1, window);
      },
      py::arg("x"), py::arg("out"),
      "(values, int64 flat indices) of max pooling a C-contiguous float32/float64 (N, C, H, W) array over "
      "PyTorch's adaptive windows, to out (Ho, Wo) (every Ho, Wo > 0 and H, W > 0).");
  m.def(
      "cpu_avg_pool2d",
      [](const py::array& x, Pair kernel, Pair stride, Pair padding, Pair out, bool count_include_pad,
         Index divisor_override) {
        const auto g = avg_geometry(x, out, kernel, stride, padding, count_include_pad, divisor_override);
        return is_double(x, "cpu_avg_pool2d") ? py::array(avg_pool<double, false>(x, g))
                                              : py::array(avg_pool<float, false>(x, g));
      },
      py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"), py::arg("out"),
      py::arg("count_include_pad"), py::arg("divisor_override"),
      "Window means of a C-contiguous float32/float64 (N, C, H, W) array (zero padding; divisor_override 0: "
      "PyTorch's divisor rules), to out (Ho, Wo).");
  m.def(
      "cpu_adaptive_avg_pool2d",
      [](const py::array& x, Pair out) {
        const auto g = avg_geometry(x, out, {1, 1}, {1, 1}, {0, 0}, true, 0);
        return is_double(x, "cpu_adaptive_avg_pool2d") ? py::array(avg_pool<double, true>(x, g))
                                                       : py::array(avg_pool<float, true>(x, g));
      },
      py::arg("x"), py::arg("out"),
      "Means of a C-contiguous float32/float64 (N, C, H, W) array over PyTorch's adaptive windows, to out "
      "(Ho, Wo) (every Ho, Wo > 0 and H, W > 0).");
}

}  // namespace adcuda::host
