// Python bindings of the indexing kernels (kernels/index.h); the Python primitives over them are in
// adcuda/backends/cuda/index.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings/registry.h"
#include "index.h"

namespace py = pybind11;
using adcuda::DeviceArray;
using adcuda::Dims;

namespace {

adcuda::IndexGeometry geometry_of(Dims shape, Dims strides, std::vector<DeviceArray> indices,
                                  std::vector<std::int64_t> index_sizes, std::vector<std::int64_t> index_strides) {
  return {std::move(shape), std::move(strides), std::move(indices), std::move(index_sizes), std::move(index_strides)};
}

}  // namespace

ADCUDA_REGISTER_BINDINGS(index, 10) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("check_indices", &adcuda::check_indices, py::arg("indices"), py::arg("sizes"), release(),
        "Checks on the device that every int64 index array k lies in [-sizes[k], sizes[k]); an index outside "
        "is raised (DeviceIndexError) at the next synchronising call, without a wait here.");
  m.def(
      "index_gather",
      [](const DeviceArray& base, Dims shape, Dims strides, std::vector<DeviceArray> indices,
         std::vector<std::int64_t> index_sizes, std::vector<std::int64_t> index_strides) {
        return adcuda::index_gather(base, geometry_of(std::move(shape), std::move(strides), std::move(indices),
                                                      std::move(index_sizes), std::move(index_strides)));
      },
      py::arg("base"), py::arg("shape"), py::arg("strides"), py::arg("indices"), py::arg("index_sizes"),
      py::arg("index_strides"), release(),
      "A new array of `shape` whose element c is base[sum c*strides + sum wrap(indices[k][c]) * index_strides[k]].");
  m.def(
      "index_scatter_",
      [](const DeviceArray& base, Dims shape, Dims strides, std::vector<DeviceArray> indices,
         std::vector<std::int64_t> index_sizes, std::vector<std::int64_t> index_strides, const DeviceArray& values,
         bool accumulate, bool deterministic) {
        adcuda::index_scatter_(base,
                               geometry_of(std::move(shape), std::move(strides), std::move(indices),
                                           std::move(index_sizes), std::move(index_strides)),
                               values, accumulate, deterministic);
      },
      py::arg("base"), py::arg("shape"), py::arg("strides"), py::arg("indices"), py::arg("index_sizes"),
      py::arg("index_strides"), py::arg("values"), py::arg("accumulate"), py::arg("deterministic"), release(),
      "The scatter of index_gather's geometry: base[...] = values (+= with accumulate; atomics unless "
      "deterministic).");
  m.def(
      "index_scatter_reduce_",
      [](const DeviceArray& base, Dims shape, Dims strides, std::vector<DeviceArray> indices,
         std::vector<std::int64_t> index_sizes, std::vector<std::int64_t> index_strides, const DeviceArray& values,
         const std::string& reduce) {
        adcuda::index_scatter_reduce_(base,
                                      geometry_of(std::move(shape), std::move(strides), std::move(indices),
                                                  std::move(index_sizes), std::move(index_strides)),
                                      values, reduce);
      },
      py::arg("base"), py::arg("shape"), py::arg("strides"), py::arg("indices"), py::arg("index_sizes"),
      py::arg("index_strides"), py::arg("values"), py::arg("reduce"), release(),
      "base[...] combined with values by reduce ('prod', 'amax' or 'amin'), duplicates included "
      "(float32, float64, int32, int64).");
}
