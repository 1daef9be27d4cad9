// The running statistics of a CPU batch norm in training (adcuda/ops/norm.py's native_batch_norm),
// updated in place in one call: running_mean <- (1 - m) running_mean + m mean and running_var <- (1 - m)
// running_var + (m n / (n - 1)) (1 / rstd^2 - eps) per channel, in the arrays' dtype, the products and
// sums the backend's elementwise ops compute on the same arrays (nine calls of a microsecond each on
// the few channels of a small batch norm, where the arithmetic is nanoseconds). Apart from norm.cpp,
// whose batch norm passes are the training programs' concern. Built in every install; releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "bind_types.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

template <typename T>
T* channels_of(std::optional<RowMajor<T>>& running, Index channels) {
  if (!running) return nullptr;
  if (running->ndim() != 1 || running->shape(0) != channels)
    throw std::invalid_argument("cpu_batch_norm_running: running statistics of the batch's channels expected");
  return running->mutable_data();  // (a read-only array throws: the caller's to avoid)
}

template <typename T>
void running_update(std::optional<RowMajor<T>> running_mean, std::optional<RowMajor<T>> running_var,
                    const RowMajor<T>& mean, const RowMajor<T>& rstd, double momentum, double eps, double var_factor) {
  const Index channels = mean.ndim() == 1 ? mean.shape(0) : -1;
  if (channels < 0 || rstd.ndim() != 1 || rstd.shape(0) != channels)
    throw std::invalid_argument("cpu_batch_norm_running: mean and rstd of shape (C,) expected");
  T* rm = channels_of(running_mean, channels);
  T* rv = channels_of(running_var, channels);
  const T* mu = mean.data();
  const T* r = rstd.data();
  // the scalars as the elementwise ops take a Python float: rounded to T first
  const T keep = T(1.0 - momentum), m = T(momentum), e = T(eps), factor = T(var_factor);
  py::gil_scoped_release release;
  for (Index c = 0; c < channels; ++c) {
    if (rm != nullptr) rm[c] = rm[c] * keep + mu[c] * m;
    if (rv != nullptr) rv[c] = rv[c] * keep + (T(1) / (r[c] * r[c]) - e) * factor;
  }
}

}  // namespace

void bind_norm_running(py::module_& m) {
  // no array_t conversion (noconvert): another dtype or a strided array is the caller's to handle
  for_types<float, double>([&](auto type) {
    using T = decltype(type);
    m.def("cpu_batch_norm_running", &running_update<T>, py::arg("running_mean").noconvert().none(true),
          py::arg("running_var").noconvert().none(true), py::arg("mean").noconvert(), py::arg("rstd").noconvert(),
          py::arg("momentum"), py::arg("eps"), py::arg("var_factor"),
          "Update C-contiguous writeable float32/float64 running_mean and running_var (C,) (either may be None) in "
          "place from a batch's mean and rstd (C,) of their dtype: (1 - momentum) running + momentum mean, and "
          "(1 - momentum) running + var_factor (1 / rstd^2 - eps).");
  });
}

}  // namespace adcuda::host
