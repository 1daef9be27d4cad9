// Python bindings of the sparse kernels (kernels/sparse.h); the Python primitives over them are in
// adcuda/backends/cuda/sparse.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>

#include "bindings/registry.h"
#include "sparse.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(sparse, 30) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("coo_to_csr", &adcuda::coo_to_csr, py::arg("rows"), py::arg("n_rows"), py::arg("rows_sorted"), release(),
        "(row_ptr, order or None): CSR row pointers of int64 `rows` in [0, n_rows), and the stable order that "
        "sorts the entries by row unless they already are.");
  m.def("spmm", &adcuda::spmm, py::arg("row_ptr"), py::arg("order"), py::arg("cols"), py::arg("values"),
        py::arg("dense"), release(), "The product of a CSR matrix (entries in `order`, or as they are) by 2-D `dense`.");
  m.def("sddmm", &adcuda::sddmm, py::arg("rows"), py::arg("cols"), py::arg("a"), py::arg("b"), release(),
        "out[k] = dot(a[rows[k]], b[cols[k]]): the gradient of spmm w.r.t. its values.");
}
