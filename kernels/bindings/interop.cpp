// Zero-copy interop with other CUDA libraries (CuPy, PyTorch, JAX, ...): DLPack capsules both ways
// (the __dlpack__ protocol), and wrapping memory described by __cuda_array_interface__ (version 3).
// Imported memory stays owned by the producer, which is released when the last adcuda array over it
// goes; exported memory keeps adcuda's Storage alive until the consumer calls the deleter.
//
// Streams: an export records the consumer's stream as a user of the memory (Storage::add_external_user):
// it waits for adcuda's earlier uses, adcuda's later uses wait for it, and the allocator reuses the
// memory only after its queued work. An import makes adcuda's current stream wait for the producer's
// stream, so neither side reads too early.
#include <Python.h>
#include <cuda_runtime_api.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "bindings/dlpack_abi.h"
#include "bindings/registry.h"
#include "runtime/device_array.h"
#include "runtime/errors.h"
#include "runtime/stream.h"

namespace py = pybind11;
namespace dl = adcuda::dlpack;
using adcuda::DeviceArray;
using adcuda::Dims;
using adcuda::ScalarType;
using adcuda::Storage;

namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr const char* kVersionedCapsuleName = "dltensor_versioned";
constexpr const char* kUsedVersionedCapsuleName = "used_dltensor_versioned";

// Keeps an exported array's memory and the shape/strides DLPack points to alive.
struct ExportContext {
  std::shared_ptr<Storage> storage;
  Dims shape;
  Dims strides;
};

template <typename Managed>
void delete_export(Managed* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
  delete self;
}

// A stream as the Python protocols name it: 1 the legacy default stream, 2 the per-thread default
// stream, anything else a cudaStream_t handle (0 is ambiguous and refused).
cudaStream_t protocol_stream(std::int64_t value, const char* op) {
  if (value == 1) return cudaStreamLegacy;
  if (value == 2) return cudaStreamPerThread;
  if (value == 0) {
    throw std::invalid_argument(std::string(op) + ": stream 0 is ambiguous; use 1 for the legacy default stream or "
                                "2 for the per-thread default stream");
  }
  return reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(value));
}

dl::DataType to_dlpack_dtype(ScalarType type) {
  const auto bits = static_cast<std::uint8_t>(adcuda::itemsize(type) * 8);
  switch (type) {
    case ScalarType::Bool: return {dl::kBool, 8, 1};
    case ScalarType::Int32:
    case ScalarType::Int64: return {dl::kInt, bits, 1};
    case ScalarType::BFloat16: return {dl::kBfloat, 16, 1};
    default: return {dl::kFloat, bits, 1};
  }
}

ScalarType from_dlpack_dtype(const dl::DataType& type) {
  if (type.lanes == 1) {
    if (type.code == dl::kBool && type.bits == 8) return ScalarType::Bool;
    if (type.code == dl::kInt && type.bits == 32) return ScalarType::Int32;
    if (type.code == dl::kInt && type.bits == 64) return ScalarType::Int64;
    if (type.code == dl::kFloat && type.bits == 16) return ScalarType::Float16;
    if (type.code == dl::kFloat && type.bits == 32) return ScalarType::Float32;
    if (type.code == dl::kFloat && type.bits == 64) return ScalarType::Float64;
    if (type.code == dl::kBfloat && type.bits == 16) return ScalarType::BFloat16;
  }
  throw py::buffer_error("from_dlpack: DLPack dtype (code " + std::to_string(type.code) + ", " +
                         std::to_string(type.bits) + " bits, " + std::to_string(type.lanes) +
                         " lanes) has no adcuda dtype (bool, int32, int64, float16, bfloat16, float32, float64)");
}

// Called when a capsule is garbage-collected: frees the tensor unless a consumer took it (renamed it).
template <typename Managed>
void capsule_destructor(PyObject* capsule, const char* name) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, name)) {
    auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

void unversioned_destructor(PyObject* capsule) { capsule_destructor<dl::ManagedTensor>(capsule, kCapsuleName); }
void versioned_destructor(PyObject* capsule) {
  capsule_destructor<dl::ManagedTensorVersioned>(capsule, kVersionedCapsuleName);
}

py::capsule to_dlpack(const DeviceArray& a, bool versioned, std::optional<std::int64_t> consumer_stream) {
  for (std::int64_t stride : a.strides()) {
    if (stride < 0) {
      throw py::buffer_error("__dlpack__: DLPack cannot describe a view with negative strides (a flip); "
                             "export .contiguous() instead");
    }
  }
  // Per the protocol, no stream means the consumer uses the legacy default stream; -1 asks for no
  // synchronisation at all (the consumer orders itself, and names no stream to record).
  if (!consumer_stream || *consumer_stream != -1) {
    cudaStream_t consumer = consumer_stream ? protocol_stream(*consumer_stream, "__dlpack__") : cudaStreamLegacy;
    py::gil_scoped_release release;
    adcuda::DeviceGuard guard(a.device());
    a.storage()->add_external_user(consumer, a.device());
  }
  auto* context = new ExportContext{a.storage(), a.shape(), a.strides()};
  const dl::Tensor tensor{a.data_ptr(),
                          {dl::kCUDA, a.device()},
                          a.ndim(),
                          to_dlpack_dtype(a.dtype()),
                          context->shape.data(),
                          context->strides.data(),
                          0};
  PyObject* capsule = nullptr;
  if (versioned) {
    auto* managed = new dl::ManagedTensorVersioned{
        {dl::kMajorVersion, dl::kMinorVersion}, context, &delete_export<dl::ManagedTensorVersioned>, 0, tensor};
    capsule = PyCapsule_New(managed, kVersionedCapsuleName, &versioned_destructor);
    if (capsule == nullptr) delete_export(managed);
  } else {
    auto* managed = new dl::ManagedTensor{tensor, context, &delete_export<dl::ManagedTensor>};
    capsule = PyCapsule_New(managed, kCapsuleName, &unversioned_destructor);
    if (capsule == nullptr) delete_export(managed);
  }
  if (capsule == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::capsule>(capsule);
}

// Runs a producer's deleter when the last adcuda array over its memory goes.
template <typename Managed>
std::shared_ptr<void> producer_owner(Managed* managed) {
  return std::shared_ptr<void>(static_cast<void*>(managed), [managed](void*) {
    if (managed->deleter == nullptr || !Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    managed->deleter(managed);
  });
}

// A DeviceArray over `data` (the address of element [0, ...]) with the given layout, owned by `owner`.
DeviceArray wrap_foreign(char* data, Dims shape, Dims strides, ScalarType dtype, int device,
                         std::shared_ptr<void> owner, cudaStream_t ready_stream) {
  // The storage spans exactly the elements the view reaches (strides may be negative).
  std::int64_t lowest = 0;
  std::int64_t end = 0;
  bool empty = false;
  for (std::int64_t extent : shape) empty = empty || extent == 0;
  if (!empty) {
    std::int64_t highest = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::int64_t reach = (shape[i] - 1) * strides[i];
      (reach < 0 ? lowest : highest) += reach;
    }
    end = highest + 1;
  }
  const auto size = static_cast<std::int64_t>(adcuda::itemsize(dtype));
  adcuda::DeviceGuard guard(device);
  cudaStream_t ours = adcuda::current_stream(device);
  if (ready_stream != nullptr) adcuda::stream_wait_stream(ours, ready_stream, device);
  auto storage = Storage::wrap(data + lowest * size, static_cast<std::size_t>((end - lowest) * size), device,
                               std::move(owner), ours);
  return DeviceArray(std::move(storage), std::move(shape), std::move(strides), -lowest, dtype);
}

DeviceArray from_dlpack(const py::capsule& capsule) {
  const char* name = PyCapsule_GetName(capsule.ptr());
  if (name == nullptr) throw py::error_already_set();
  dl::Tensor* tensor = nullptr;
  std::shared_ptr<void> owner;
  if (std::strcmp(name, kVersionedCapsuleName) == 0) {
    auto* managed = static_cast<dl::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), name));
    if (managed == nullptr) throw py::error_already_set();
    if (managed->version.major > dl::kMajorVersion) {
      throw py::buffer_error("from_dlpack: the producer's DLPack version " + std::to_string(managed->version.major) +
                             "." + std::to_string(managed->version.minor) + " is newer than adcuda understands (" +
                             std::to_string(dl::kMajorVersion) + ".x)");
    }
    if (managed->flags & dl::kFlagReadOnly) {
      throw py::buffer_error("from_dlpack: the producer exports read-only memory, and adcuda tensors are writable; "
                             "copy it first");
    }
    tensor = &managed->dl_tensor;
    owner = producer_owner(managed);
    PyCapsule_SetName(capsule.ptr(), kUsedVersionedCapsuleName);
  } else if (std::strcmp(name, kCapsuleName) == 0) {
    auto* managed = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), name));
    if (managed == nullptr) throw py::error_already_set();
    tensor = &managed->dl_tensor;
    owner = producer_owner(managed);
    PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
  } else {
    throw py::type_error(std::string("from_dlpack: expected a DLPack capsule named 'dltensor' or "
                                     "'dltensor_versioned', got one named '") +
                         name + "' (a capsule can be consumed only once)");
  }
  // From here on the capsule is consumed: `owner` runs the producer's deleter on every exit path.
  if (tensor->device.device_type != dl::kCUDA && tensor->device.device_type != dl::kCUDAManaged) {
    throw py::buffer_error("from_dlpack: this path takes CUDA memory, got DLPack device type " +
                           std::to_string(tensor->device.device_type));
  }
  const ScalarType dtype = from_dlpack_dtype(tensor->dtype);
  Dims shape(tensor->shape, tensor->shape + tensor->ndim);
  Dims strides = tensor->strides != nullptr ? Dims(tensor->strides, tensor->strides + tensor->ndim)
                                            : adcuda::contiguous_strides(shape);
  char* data = static_cast<char*>(tensor->data) + tensor->byte_offset;
  py::gil_scoped_release release;
  return wrap_foreign(data, std::move(shape), std::move(strides), dtype, tensor->device.device_id, std::move(owner),
                      nullptr);
}

DeviceArray from_cuda_array_interface(std::uintptr_t pointer, Dims shape, std::optional<Dims> byte_strides,
                                      ScalarType dtype, const py::object& owner, std::optional<std::int64_t> stream) {
  const auto size = static_cast<std::int64_t>(adcuda::itemsize(dtype));
  Dims strides;
  if (byte_strides) {
    if (byte_strides->size() != shape.size()) {
      throw std::invalid_argument("__cuda_array_interface__: shape and strides differ in length");
    }
    for (std::int64_t stride : *byte_strides) {
      if (stride % size != 0) {
        throw std::invalid_argument("__cuda_array_interface__: stride " + std::to_string(stride) +
                                    " bytes is not a multiple of the element size " + std::to_string(size));
      }
      strides.push_back(stride / size);
    }
  } else {
    strides = adcuda::contiguous_strides(shape);
  }
  auto* held = new py::object(owner);
  std::shared_ptr<void> keep_alive(static_cast<void*>(held), [held](void*) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    delete held;
  });
  py::gil_scoped_release release;
  int device = 0;
  if (pointer != 0) {
    cudaPointerAttributes attributes{};
    ADCUDA_CHECK(cudaPointerGetAttributes(&attributes, reinterpret_cast<void*>(pointer)));
    if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
      throw std::invalid_argument("__cuda_array_interface__: the data pointer is not CUDA device memory");
    }
    device = attributes.device;
  } else {
    ADCUDA_CHECK(cudaGetDevice(&device));
  }
  cudaStream_t producer = stream ? protocol_stream(*stream, "__cuda_array_interface__") : nullptr;
  return wrap_foreign(reinterpret_cast<char*>(pointer), std::move(shape), std::move(strides), dtype, device,
                      std::move(keep_alive), producer);
}

}  // namespace

ADCUDA_REGISTER_BINDINGS(interop, 1) {
  m.def("to_dlpack", &to_dlpack, py::arg("array"), py::arg("versioned"), py::arg("consumer_stream") = py::none(),
        "A DLPack capsule over the array's memory ('dltensor_versioned' when versioned). consumer_stream "
        "(None: the legacy default stream, -1: none) waits for the array's earlier uses and is recorded as a "
        "user of its memory.");
  m.def("from_dlpack", &from_dlpack, py::arg("capsule"),
        "A DeviceArray over the CUDA memory of a DLPack capsule (consumes it; no copy).");
  m.def("from_cuda_array_interface", &from_cuda_array_interface, py::arg("pointer"), py::arg("shape"),
        py::arg("strides"), py::arg("dtype"), py::arg("owner"), py::arg("stream"),
        "A DeviceArray over memory described by __cuda_array_interface__ (strides in bytes or None); `owner` "
        "is kept alive, and the current stream waits for `stream` (None: no synchronisation needed).");
}
