// Python bindings of the recurrent cell kernels (kernels/recurrent.h); the Python primitives over them are in
// adcuda/backends/cuda/recurrent.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "recurrent.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(recurrent, 24) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("lstm_cell", &adcuda::lstm_cell, py::arg("gi"), py::arg("gh"), py::arg("c"), release(),
        "hc (2, B, H) = (o * tanh(c'), c') from projections (B, 4H) and the cell state (B, H).");
  m.def("lstm_cell_backward", &adcuda::lstm_cell_backward, py::arg("grad"), py::arg("gi"), py::arg("gh"),
        py::arg("c"), py::arg("hc"), release(), "(d_gates, d_c) from the gradient of hc.");
  m.def("gru_cell", &adcuda::gru_cell, py::arg("gi"), py::arg("gh"), py::arg("h"), release(),
        "h' = (1 - z) * n + z * h from projections (B, 3H) and the state (B, H).");
  m.def("gru_cell_backward", &adcuda::gru_cell_backward, py::arg("grad"), py::arg("gi"), py::arg("gh"),
        py::arg("h"), release(), "(d_gi, d_gh, d_h) from the gradient of h'.");
}
