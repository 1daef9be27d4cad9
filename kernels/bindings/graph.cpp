// Python bindings of CUDA graphs (kernels/runtime/graph.h) and the allocator's private pools, for
// adcuda/cuda/graphs.py.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "bindings/registry.h"
#include "runtime/allocator.h"
#include "runtime/graph.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(graph, 5) {
  // An illegal call during a capture becomes adcuda.cuda.GraphCaptureError (a RuntimeError).
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const adcuda::GraphCaptureError& e) {
      py::object type = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
      try {
        type = py::module_::import("adcuda.cuda.errors").attr("GraphCaptureError");
      } catch (py::error_already_set&) {
        // keep RuntimeError: the message still says what happened
      }
      PyErr_SetString(type.ptr(), e.what());
    }
  });
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<adcuda::CudaGraph>(m, "CudaGraph", "A CUDA graph captured from the thread's current stream.")
      .def(py::init<>())
      .def("capture_begin", &adcuda::CudaGraph::capture_begin, py::arg("pool"), py::arg("mode"), release(),
           "Start capturing the current stream (pool 0: a new private pool); the device is synchronised first.")
      .def("capture_end", &adcuda::CudaGraph::capture_end, release(), "End the capture and instantiate the graph.")
      .def("abort_capture", &adcuda::CudaGraph::abort_capture, release(), "Discard a capture that failed midway.")
      .def("replay", &adcuda::CudaGraph::replay, py::arg("seed"), py::arg("offset"), release(),
           "Launch the graph on the current stream, its random kernels keyed by (seed, offset base).")
      .def("update_from", &adcuda::CudaGraph::update_from, py::arg("other"), release(),
           "Take other's kernel arguments (cudaGraphExecUpdate); False when the topology differs.")
      .def("reset", &adcuda::CudaGraph::reset, release(), "Free the graph and let go of its pool.")
      .def_property_readonly("captured", &adcuda::CudaGraph::captured)
      .def_property_readonly("capturing", &adcuda::CudaGraph::capturing)
      .def_property_readonly("pool", &adcuda::CudaGraph::pool)
      .def_property_readonly("device", &adcuda::CudaGraph::device)
      .def_property_readonly("node_count", &adcuda::CudaGraph::node_count);
  m.def("new_private_pool_id", &adcuda::new_private_pool_id, "A fresh private pool id (graph_pool_handle).");
  m.def("private_pool_reserved_bytes", &adcuda::private_pool_reserved_bytes, py::arg("device"), py::arg("pool"),
        "Bytes of the segments the private pool holds.");
  m.def(
      "stream_is_capturing",
      [](std::uintptr_t stream) { return adcuda::stream_is_capturing(reinterpret_cast<cudaStream_t>(stream)); },
      py::arg("stream"), "Whether the stream captures a CUDA graph now.");
}
