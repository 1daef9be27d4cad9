// Python bindings of the CUDA runtime (kernels/runtime/): DeviceArray and its Storage, streams and
// events, the caching allocator, the pinned-memory pool, copies, and context set-up. The Python layer
// over them is adcuda/cuda/ and adcuda/backends/cuda/storage.py.
//
// Every call that queues or waits for GPU work releases the GIL (none of them touches Python objects
// while it runs); host buffers are read from their Python objects before the GIL is let go.
#include <cuda_runtime_api.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bindings/registry.h"
#include "runtime/allocator.h"
#include "runtime/copy.h"
#include "runtime/device.h"
#include "runtime/device_array.h"
#include "runtime/device_errors.h"
#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/pinned_pool.h"
#include "runtime/process.h"
#include "runtime/stream.h"
#include "runtime/testing.h"

namespace py = pybind11;
using adcuda::DeviceArray;
using adcuda::Dims;
using adcuda::ScalarType;
using adcuda::Storage;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

std::uintptr_t handle_value(cudaStream_t stream) { return reinterpret_cast<std::uintptr_t>(stream); }
cudaStream_t stream_from(std::uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

py::tuple to_tuple(const Dims& dims, std::int64_t scale = 1) {
  py::tuple result(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) result[i] = py::int_(dims[i] * scale);
  return result;
}

int device_or_current(int device) {
  if (device >= 0) return device;
  return adcuda::current_device();
}

// Page-locked host memory from the pool, alive as long as the Python object (and the NumPy arrays
// made over it with the buffer protocol) is.
class PinnedMemory {
 public:
  explicit PinnedMemory(std::size_t nbytes) : block_(adcuda::pinned_malloc(nbytes)), nbytes_(nbytes) {}
  ~PinnedMemory() { adcuda::pinned_free(block_); }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  void* data() const { return adcuda::pinned_pointer(block_); }
  std::size_t nbytes() const { return nbytes_; }

 private:
  adcuda::PinnedBlock* block_;
  std::size_t nbytes_;
};

// A stream from the pool, returned to it when the Python object goes (adcuda.cuda.Stream()).
class PooledStream {
 public:
  explicit PooledStream(int device) : device_(device), stream_(adcuda::acquire_stream(device)) {}
  ~PooledStream() {
    if (!adcuda::in_bad_fork()) adcuda::release_stream(device_, stream_);
  }
  PooledStream(const PooledStream&) = delete;
  PooledStream& operator=(const PooledStream&) = delete;
  std::uintptr_t handle() const { return handle_value(stream_); }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_;
};

// A CUDA event (adcuda.cuda.Event), created on `device`.
class Event {
 public:
  Event(int device, bool enable_timing, bool blocking) : device_(device) {
    adcuda::ensure_usable_after_fork("create a CUDA event");
    adcuda::DeviceGuard guard(device);
    unsigned int flags = enable_timing ? cudaEventDefault : cudaEventDisableTiming;
    if (blocking) flags |= cudaEventBlockingSync;
    ADCUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
    adcuda::note_cuda_used();
  }
  ~Event() {
    if (!adcuda::in_bad_fork()) cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(std::uintptr_t stream) { ADCUDA_CHECK(cudaEventRecord(event_, stream_from(stream))); }
  void wait(std::uintptr_t stream) { ADCUDA_CHECK(cudaStreamWaitEvent(stream_from(stream), event_, 0)); }
  bool query() {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    ADCUDA_CHECK(status);
    return true;
  }
  void synchronize() {
    ADCUDA_CHECK(cudaEventSynchronize(event_));
    adcuda::raise_device_errors();
  }
  float elapsed_time(const Event& end) const {
    float milliseconds = 0.0f;
    ADCUDA_CHECK(cudaEventElapsedTime(&milliseconds, event_, end.event_));
    return milliseconds;
  }
  int device() const { return device_; }
  std::uintptr_t handle() const { return reinterpret_cast<std::uintptr_t>(event_); }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

bool stream_query(std::uintptr_t stream) {
  const cudaError_t status = cudaStreamQuery(stream_from(stream));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  ADCUDA_CHECK(status);
  return true;
}

const void* host_data(const py::array& host, std::size_t expected_bytes, const char* op) {
  if (!(host.flags() & py::array::c_style)) {
    throw std::invalid_argument(std::string(op) + ": the host array must be C-contiguous");
  }
  if (static_cast<std::size_t>(host.nbytes()) != expected_bytes) {
    throw std::invalid_argument(std::string(op) + ": the host array has " + std::to_string(host.nbytes()) +
                                " bytes, the device array " + std::to_string(expected_bytes));
  }
  return host.data();
}

// PyTorch's memory_stats() keys: "<stat>.<all|small_pool|large_pool>.<current|peak|allocated|freed>" and
// the num_* counters, then adcuda's own counters.
py::dict allocator_stats_dict(int device) {
  const adcuda::AllocatorStats s = adcuda::allocator_stats(device);
  py::dict d;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add = [&](const char* name, const adcuda::Stat (&stat)[adcuda::kPoolKinds], bool history) {
    for (int pool = 0; pool < adcuda::kPoolKinds; ++pool) {
      const std::string prefix = std::string(name) + "." + pools[pool] + ".";
      d[py::str(prefix + "current")] = stat[pool].current;
      if (!history) continue;
      d[py::str(prefix + "peak")] = stat[pool].peak;
      d[py::str(prefix + "allocated")] = stat[pool].allocated;
      d[py::str(prefix + "freed")] = stat[pool].freed;
    }
  };
  add("allocated_bytes", s.allocated_bytes, true);
  add("requested_bytes", s.requested_bytes, true);
  add("reserved_bytes", s.reserved_bytes, true);
  add("active", s.active, true);
  add("active_bytes", s.active_bytes, true);
  add("inactive_split", s.inactive_split, false);  // counted when asked: current values only
  add("inactive_split_bytes", s.inactive_split_bytes, false);
  add("segment", s.segment, true);
  add("allocation", s.allocation, true);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["cache_hits"] = s.cache_hits;
  d["cross_stream_reuses"] = s.cross_stream_reuses;
  d["pending_blocks"] = s.pending_blocks;
  d["cached_blocks"] = s.cached_blocks;
  return d;
}

py::dict pinned_stats_dict() {
  const adcuda::PinnedStats s = adcuda::pinned_stats();
  py::dict d;
  d["allocated_bytes"] = s.allocated_bytes;
  d["peak_allocated_bytes"] = s.peak_allocated_bytes;
  d["reserved_bytes"] = s.reserved_bytes;
  d["peak_reserved_bytes"] = s.peak_reserved_bytes;
  d["active_blocks"] = s.active_blocks;
  d["cached_blocks"] = s.cached_blocks;
  d["pending_blocks"] = s.pending_blocks;
  d["allocations"] = s.allocations;
  d["cache_hits"] = s.cache_hits;
  d["host_allocs"] = s.host_allocs;
  d["host_frees"] = s.host_frees;
  d["recorded_uses"] = s.recorded_uses;
  return d;
}

adcuda::Scalar to_scalar(const py::object& value) {
  if (py::isinstance<py::bool_>(value)) return adcuda::Scalar::from_bool(value.cast<bool>());
  if (py::isinstance<py::int_>(value)) return adcuda::Scalar::from_int(value.cast<std::int64_t>());
  return adcuda::Scalar::from_float(value.cast<double>());
}

std::string array_repr(const DeviceArray& a) {
  return std::string("DeviceArray(shape=") + adcuda::format_dims(a.shape()) + ", dtype=" +
         adcuda::scalar_type_name(a.dtype()) + ", device=cuda:" + std::to_string(a.device()) +
         ", strides=" + adcuda::format_dims(a.strides()) + ", offset=" + std::to_string(a.offset()) + ")";
}

}  // namespace

ADCUDA_REGISTER_BINDINGS(runtime, 0) {
  // A kernel's report (device_errors.h) becomes adcuda.cuda.DeviceIndexError, an IndexOutOfRangeError.
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const adcuda::DeviceSideError& e) {
      py::object type = py::reinterpret_borrow<py::object>(PyExc_IndexError);
      try {
        type = py::module_::import("adcuda.cuda.errors").attr("DeviceIndexError");
      } catch (py::error_already_set&) {
        // keep IndexError: the message still says what happened
      }
      PyErr_SetString(type.ptr(), e.what());
    }
  });
  py::enum_<ScalarType>(m, "ScalarType", "Element types of a DeviceArray (the names of adcuda's dtypes).")
      .value("bool", ScalarType::Bool)
      .value("int32", ScalarType::Int32)
      .value("int64", ScalarType::Int64)
      .value("float16", ScalarType::Float16)
      .value("bfloat16", ScalarType::BFloat16)
      .value("float32", ScalarType::Float32)
      .value("float64", ScalarType::Float64);

  py::class_<Storage, std::shared_ptr<Storage>>(
      m, "Storage", "Device memory shared by a DeviceArray and its views (what DeviceArray.base returns).")
      .def_property_readonly("data_ptr", [](const Storage& s) { return reinterpret_cast<std::uintptr_t>(s.data()); })
      .def_property_readonly("nbytes", &Storage::nbytes)
      .def_property_readonly("device", &Storage::device)
      .def_property_readonly("from_allocator", &Storage::from_allocator,
                             "False for memory wrapped from another library (DLPack, __cuda_array_interface__).");

  py::class_<DeviceArray>(m, "DeviceArray",
                          "The CUDA backend's array: shape, strides and offset over a Storage. NumPy's "
                          "conventions for the attributes (strides in bytes; element_strides in elements).")
      .def_static("empty", &DeviceArray::empty, py::arg("shape"), py::arg("dtype"), py::arg("device") = -1,
                  release_gil(), "A new contiguous, uninitialised array (device -1: the current device).")
      .def_property_readonly("shape", [](const DeviceArray& a) { return to_tuple(a.shape()); })
      .def_property_readonly("strides",
                             [](const DeviceArray& a) {
                               return to_tuple(a.strides(), static_cast<std::int64_t>(a.itemsize()));
                             })
      .def_property_readonly("element_strides", [](const DeviceArray& a) { return to_tuple(a.strides()); })
      .def_property_readonly("offset", &DeviceArray::offset)
      .def_property_readonly("dtype", &DeviceArray::dtype)
      .def_property_readonly("device", &DeviceArray::device)
      .def_property_readonly("ndim", &DeviceArray::ndim)
      .def_property_readonly("size", &DeviceArray::numel)
      .def_property_readonly("itemsize", &DeviceArray::itemsize)
      .def_property_readonly("nbytes", &DeviceArray::nbytes)
      .def("data_ptr", [](const DeviceArray& a) { return reinterpret_cast<std::uintptr_t>(a.data_ptr()); })
      .def("is_contiguous", &DeviceArray::is_contiguous)
      .def("extent", &DeviceArray::extent,
           "(lowest, highest + 1) element index from the storage's start that the array reaches.")
      .def_property_readonly("storage", &DeviceArray::storage)
      .def_property_readonly(
          "base",
          [](const DeviceArray& a) -> py::object {
            const auto& storage = a.storage();
            if (storage.use_count() == 1 && storage->from_allocator()) return py::none();
            return py::cast(storage);
          },
          "None when no other array, view or export shares this array's memory and it came from adcuda's "
          "allocator (so it may be taken over without a copy); otherwise the shared Storage.")
      .def_property_readonly("last_stream",
                             [](const DeviceArray& a) -> py::object {
                               cudaStream_t stream = a.storage()->last_stream();
                               if (stream == nullptr) return py::none();
                               return py::int_(handle_value(stream));
                             },
                             "Handle of the stream whose queued work used the memory last (None: none yet).")
      .def("as_strided", &DeviceArray::as_strided, py::arg("shape"), py::arg("strides"), py::arg("offset"),
           "A view of the same storage; shape, strides (elements) and offset (elements from the storage's "
           "start) must stay inside it.")
      .def("__repr__", &array_repr);

  m.def("may_overlap", &adcuda::may_overlap, py::arg("a"), py::arg("b"));
  m.def("copy_", &adcuda::copy_, py::arg("dst"), py::arg("src"), release_gil());
  m.def(
      "fill_",
      [](const DeviceArray& dst, const py::object& value) {
        const adcuda::Scalar scalar = to_scalar(value);
        py::gil_scoped_release release;
        adcuda::fill_(dst, scalar);
      },
      py::arg("dst"), py::arg("value"));
  m.def("astype", &adcuda::astype, py::arg("a"), py::arg("dtype"), release_gil());
  m.def("contiguous", &adcuda::contiguous, py::arg("a"), release_gil());
  m.def(
      "arange",
      [](const py::object& start, const py::object& step, std::int64_t n, ScalarType dtype, int device) {
        const adcuda::Scalar first = to_scalar(start);
        const adcuda::Scalar delta = to_scalar(step);
        py::gil_scoped_release release;
        return adcuda::arange(first, delta, n, dtype, device);
      },
      py::arg("start"), py::arg("step"), py::arg("n"), py::arg("dtype"), py::arg("device") = -1);
  m.def(
      "copy_host_to_device",
      [](const DeviceArray& dst, const py::array& host, bool synchronize) {
        const void* data = host_data(host, dst.nbytes(), "copy_host_to_device");
        py::gil_scoped_release release;
        adcuda::copy_host_to_device(dst, data, dst.nbytes(), synchronize);
      },
      py::arg("dst"), py::arg("host"), py::arg("synchronize"),
      "Copy a C-contiguous host array into contiguous `dst` on the current stream; waits only with "
      "synchronize=True (the pinned pool keeps its blocks until the copy is done).");
  m.def(
      "copy_device_to_host",
      [](py::array host, const DeviceArray& src) {
        if (!host.writeable()) throw std::invalid_argument("copy_device_to_host: the host array is read-only");
        host_data(host, src.nbytes(), "copy_device_to_host");
        void* data = host.mutable_data();
        py::gil_scoped_release release;
        adcuda::copy_device_to_host(data, src, src.nbytes());
      },
      py::arg("host"), py::arg("src"), "Copy contiguous `src` into a C-contiguous host array and wait for it.");

  // Streams and events.
  m.def("current_stream", [](int device) { return handle_value(adcuda::current_stream(device_or_current(device))); },
        py::arg("device") = -1, "Handle of the calling thread's current stream on `device` (-1: current device).");
  m.def("thread_stream", [](int device) { return handle_value(adcuda::thread_stream(device_or_current(device))); },
        py::arg("device") = -1, "Handle of the calling thread's own stream on `device`.");
  m.def(
      "exchange_current_stream",
      [](int device, std::uintptr_t stream) {
        adcuda::ensure_usable_after_fork("select a CUDA stream");
        return handle_value(adcuda::exchange_current_stream(device, stream_from(stream)));
      },
      py::arg("device"), py::arg("stream"),
      "Make `stream` the thread's current stream on `device` (0: its own stream again); returns the previous "
      "selection (0: none).");
  m.def("stream_query", &stream_query, py::arg("stream"), "Whether all work queued on the stream has finished.");
  m.def(
      "stream_synchronize",
      [](std::uintptr_t stream) {
        adcuda::refuse_during_capture(stream_from(stream), "Stream.synchronize()");
        ADCUDA_CHECK(cudaStreamSynchronize(stream_from(stream)));
        adcuda::raise_device_errors();
      },
      py::arg("stream"), release_gil());
  m.def("raise_device_errors", &adcuda::raise_device_errors, release_gil(),
        "Raise the error a kernel reported since the last synchronising call (device_errors.h), if any.");
  m.def(
      "stream_wait_stream",
      [](std::uintptr_t waiter, std::uintptr_t producer, int producer_device) {
        adcuda::stream_wait_stream(stream_from(waiter), stream_from(producer), producer_device);
      },
      py::arg("waiter"), py::arg("producer"), py::arg("producer_device"), release_gil());
  py::class_<PooledStream>(m, "PooledStream", "A non-blocking stream from the pool; back to the pool when deleted.")
      .def(py::init<int>(), py::arg("device"))
      .def_property_readonly("handle", &PooledStream::handle)
      .def_property_readonly("device", &PooledStream::device);
  py::class_<Event>(m, "Event")
      .def(py::init<int, bool, bool>(), py::arg("device"), py::arg("enable_timing") = false,
           py::arg("blocking") = false)
      .def("record", &Event::record, py::arg("stream"))
      .def("wait", &Event::wait, py::arg("stream"))
      .def("query", &Event::query)
      .def("synchronize", &Event::synchronize, release_gil())
      .def("elapsed_time", &Event::elapsed_time, py::arg("end"))
      .def_property_readonly("device", &Event::device)
      .def_property_readonly("handle", &Event::handle);

  // The caching allocator.
  m.def("memory_stats", &allocator_stats_dict, py::arg("device"));
  m.def("reset_peak_memory_stats", &adcuda::reset_peak_allocator_stats, py::arg("device"));
  m.def("empty_cache", &adcuda::empty_cache, release_gil());
  m.def("device_block_size", &adcuda::device_block_size, py::arg("nbytes"),
        "The bytes of the block the caching allocator hands out for a request of `nbytes`.");
  m.def("allocation_size_class", &adcuda::allocation_size_class, py::arg("nbytes"),
        "The size class of the pinned host pool for a request of `nbytes`.");
  m.def(
      "raw_malloc",
      [](std::size_t nbytes, int device) {
        return reinterpret_cast<std::uintptr_t>(adcuda::raw_device_malloc(nbytes, device));
      },
      py::arg("nbytes"), py::arg("device"), release_gil(), "cudaMalloc without the cache (benchmarks).");
  m.def(
      "raw_free",
      [](std::uintptr_t pointer, int device) { adcuda::raw_device_free(reinterpret_cast<void*>(pointer), device); },
      py::arg("pointer"), py::arg("device"), release_gil());

  // The pinned-memory pool.
  py::class_<PinnedMemory>(m, "PinnedMemory", py::buffer_protocol(),
                           "Page-locked host memory from the pool; a NumPy array over it keeps it alive.")
      .def(py::init<std::size_t>(), py::arg("nbytes"), release_gil())
      .def_property_readonly("nbytes", &PinnedMemory::nbytes)
      .def_property_readonly("data_ptr",
                             [](const PinnedMemory& p) { return reinterpret_cast<std::uintptr_t>(p.data()); })
      .def_buffer([](PinnedMemory& p) {
        return py::buffer_info(p.data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(p.nbytes())}, {static_cast<py::ssize_t>(1)});
      });
  m.def("pinned_memory_stats", &pinned_stats_dict);
  m.def("reset_peak_pinned_memory_stats", &adcuda::reset_peak_pinned_stats);
  m.def("pinned_empty_cache", &adcuda::pinned_empty_cache, release_gil());
  m.def(
      "is_pool_pinned",
      [](std::uintptr_t pointer) { return adcuda::pinned_block_containing(reinterpret_cast<void*>(pointer)) != nullptr; },
      py::arg("pointer"), "Whether the address lies in a block of adcuda's pinned pool.");
  m.def(
      "is_page_locked",
      [](std::uintptr_t pointer) {
        adcuda::ensure_usable_after_fork("query a host pointer");
        cudaPointerAttributes attributes{};
        const cudaError_t status = cudaPointerGetAttributes(&attributes, reinterpret_cast<void*>(pointer));
        if (status != cudaSuccess) {
          cudaGetLastError();
          return false;
        }
        return attributes.type == cudaMemoryTypeHost;
      },
      py::arg("pointer"), "Whether CUDA knows the host address as page-locked (any library's pinned memory).");

  m.def(
      "cuda_visible_devices_without_initialising",
      []() -> py::object {
        const auto devices = adcuda::visible_devices_without_initialising();
        if (!devices) return py::none();
        py::list out;
        for (const adcuda::DeviceSummary& d : *devices) out.append(py::make_tuple(d.name, d.major, d.minor));
        return out;
      },
      "[(name, major, minor)] of the visible devices as cuda_device_count() learned them without initialising "
      "CUDA (from NVML), or None when it had to initialise the CUDA runtime to count them.");

  // Context and process state.
  m.def("initialize_context", &adcuda::initialize_context, py::arg("device"), release_gil(),
        "Make `device` current, create its context and the calling thread's stream on it.");
  m.def("memory_info", &adcuda::memory_info, py::arg("device"), release_gil(), "(free, total) device memory.");
  m.def("in_bad_fork", &adcuda::in_bad_fork, "Whether this process was forked after its parent used CUDA.");
  m.def("cuda_was_used", &adcuda::cuda_was_used,
        "Whether this process has initialised the CUDA driver with a device present (a child forked from now "
        "on cannot use CUDA).");
  m.def(
      "external_users",
      [](const DeviceArray& a) {
        py::list out;
        for (const adcuda::StreamUse& use : a.storage()->external_users()) {
          out.append(py::make_tuple(handle_value(use.stream), use.device));
        }
        return out;
      },
      py::arg("array"), "[(stream handle, device)] recorded as users of the array's memory by other libraries.");
  m.def(
      "record_external_use",
      [](const DeviceArray& a, std::uintptr_t stream, int stream_device) {
        a.storage()->add_external_user(stream_from(stream), stream_device < 0 ? a.device() : stream_device);
      },
      py::arg("array"), py::arg("stream"), py::arg("stream_device") = -1, release_gil(),
      "Record `stream` (a handle; 1: the legacy default stream, 2: the per-thread default stream) as a user "
      "of the array's memory: it waits for the earlier uses now, every later use waits for it, and the memory "
      "is reused only after its queued work (PyTorch's record_stream).");
  m.def(
      "fill_bytes_untracked",
      [](std::uintptr_t pointer, std::size_t nbytes, int value, std::uintptr_t stream) {
        adcuda::fill_bytes_untracked(pointer, nbytes, value, stream);
      },
      py::arg("pointer"), py::arg("nbytes"), py::arg("value"), py::arg("stream"), release_gil(),
      "Test support: cudaMemsetAsync on `stream`, unknown to the runtime (as another library's write).");
  m.def("last_stream_during_and_after_launch", &adcuda::last_stream_during_and_after_launch, py::arg("array"),
        py::arg("cycles"), release_gil(),
        "Test support: the array's last stream inside a launch in progress over it, and after the launch.");
  m.def("pooled_stream_count", &adcuda::pooled_stream_count, py::arg("device"),
        "Test support: how many streams of `device` wait in the stream pool.");
  m.def("cuda_spin", &adcuda::spin_current_stream, py::arg("cycles"), release_gil(),
        "Test support: keep the current stream busy for `cycles` GPU clock cycles.");
}
