// Python bindings of the embedding kernels (kernels/embedding.h); the Python primitives over them are in
// adcuda/backends/cuda/embedding.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "bindings/registry.h"
#include "embedding.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(embedding, 23) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("embedding", &adcuda::embedding, py::arg("weight"), py::arg("indices"), release(),
        "Rows of 2-D `weight` at int32/int64 `indices`; IndexError naming an index outside [0, num_embeddings) "
        "(checked on the device, one sync).");
  m.def("embedding_backward", &adcuda::embedding_backward, py::arg("grad"), py::arg("indices"),
        py::arg("num_embeddings"), py::arg("padding_idx"), py::arg("scale_grad_by_freq"), release(),
        "The dense, deterministic weight gradient (sorted runs summed in index order; padding_idx -1 for none).");
}
