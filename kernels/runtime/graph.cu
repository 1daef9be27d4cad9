#include "runtime/graph.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "runtime/allocator.h"
#include "runtime/errors.h"
#include "runtime/launch.cuh"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace adcuda {
namespace {

// Streams capturing now, with the Philox state their random kernels read. Launch paths ask on every
// random draw, so the common "nothing captures" case is one atomic load.
struct Captures {
  std::mutex mutex;
  std::unordered_map<cudaStream_t, const std::uint64_t*> philox_by_stream;
  std::atomic<int> underway{0};
};

Captures& captures() {
  static Captures* instance = new Captures();  // leaked: graphs may be freed by Python finalisers late
  return *instance;
}

std::atomic<std::uint64_t> next_pool_id{1};

__global__ void write_philox_state_kernel(std::uint64_t* state, std::uint64_t seed, std::uint64_t offset) {
  state[0] = seed;
  state[1] = offset;
}

std::string capture_error_text(cudaError_t status) {
  return describe_cuda_error(static_cast<int>(status));
}

}  // namespace

bool stream_is_capturing(cudaStream_t stream) {
  if (captures().underway.load(std::memory_order_acquire) == 0) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ADCUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

void refuse_during_capture(cudaStream_t stream, const std::string& what) {
  if (!stream_is_capturing(stream)) return;
  throw GraphCaptureError(what + " is not allowed while the stream captures a CUDA graph: a graph replays device "
                                 "work only, so nothing may wait for the device or move data to or from the host "
                                 "during the capture. Do it before capture_begin or after capture_end.");
}

void refuse_during_any_capture(const std::string& what) {
  if (captures().underway.load(std::memory_order_acquire) == 0) return;
  throw GraphCaptureError(what + " is not allowed while a CUDA graph is being captured: it would synchronise the "
                                 "capturing stream. Do it before capture_begin or after capture_end.");
}

const std::uint64_t* capture_philox_state(cudaStream_t stream) {
  if (captures().underway.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(captures().mutex);
  auto it = captures().philox_by_stream.find(stream);
  return it == captures().philox_by_stream.end() ? nullptr : it->second;
}

std::uint64_t new_private_pool_id() { return next_pool_id.fetch_add(1); }

CudaGraph::~CudaGraph() {
  abort_capture();
  reset();
}

void CudaGraph::capture_begin(std::uint64_t pool, int mode) {
  ensure_usable_after_fork("capture a CUDA graph");
  if (capturing_) throw GraphCaptureError("CUDAGraph.capture_begin: this graph is already capturing");
  if (exec_ != nullptr) {
    throw GraphCaptureError("CUDAGraph.capture_begin: this graph already holds a capture; call reset() first");
  }
  ADCUDA_CHECK(cudaGetDevice(&device_));
  cudaStream_t stream = current_stream(device_);
  if (stream_is_capturing(stream)) {
    throw GraphCaptureError("CUDAGraph.capture_begin: the current stream is already capturing another graph");
  }
  if (!philox_state_) philox_state_ = std::make_shared<DeviceArray>(DeviceArray::empty({2}, ScalarType::Int64, device_));
  // Work queued before the capture (on any stream) is done when it starts: the graph depends on none
  // of it, and cross-stream waits inside the capture may be left out (stream.cu).
  ADCUDA_CHECK(cudaDeviceSynchronize());
  pool_ = pool != 0 ? pool : new_private_pool_id();
  begin_allocate_to_pool(device_, pool_, stream);
  {
    std::lock_guard<std::mutex> lock(captures().mutex);
    captures().philox_by_stream[stream] = reinterpret_cast<const std::uint64_t*>(philox_state_->data_ptr());
    captures().underway.fetch_add(1, std::memory_order_release);
  }
  const cudaError_t status = cudaStreamBeginCapture(stream, static_cast<cudaStreamCaptureMode>(mode));
  if (status != cudaSuccess) {
    cudaGetLastError();
    stream_ = stream;
    finish_capture(nullptr);
    end_allocate_to_pool(device_, pool_, stream);
    throw_cuda_error(static_cast<int>(status), "cudaStreamBeginCapture(stream, mode)", __FILE__, __LINE__);
  }
  stream_ = stream;
  capturing_ = true;
}

void CudaGraph::finish_capture(cudaGraph_t graph) noexcept {
  {
    std::lock_guard<std::mutex> lock(captures().mutex);
    captures().philox_by_stream.erase(stream_);
    captures().underway.fetch_sub(1, std::memory_order_release);
  }
  capturing_ = false;
  graph_ = graph;
}

void CudaGraph::capture_end() {
  if (!capturing_) throw GraphCaptureError("CUDAGraph.capture_end: no capture in progress (call capture_begin first)");
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(stream_, &graph);
  finish_capture(graph);
  // The graph holds the pool before the capture lets go of it, which would otherwise dissolve it.
  if (status == cudaSuccess) {
    retain_private_pool(device_, pool_);
    holds_pool_ = true;
  }
  end_allocate_to_pool(device_, pool_, stream_);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    graph_ = nullptr;
    throw GraphCaptureError("CUDAGraph.capture_end: the capture failed (" + capture_error_text(status) +
                            "): a call during the capture was not allowed (a synchronisation, a host copy or an "
                            "event query); the error it raised then says which");
  }
  const cudaError_t instantiated = cudaGraphInstantiate(&exec_, graph_, 0);
  if (instantiated != cudaSuccess) {
    cudaGetLastError();
    exec_ = nullptr;
    reset();
    throw_cuda_error(static_cast<int>(instantiated), "cudaGraphInstantiate(&exec_, graph_, 0)", __FILE__, __LINE__);
  }
}

void CudaGraph::abort_capture() noexcept {
  if (!capturing_) return;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_, &graph);
  cudaGetLastError();
  if (graph != nullptr) cudaGraphDestroy(graph);
  finish_capture(nullptr);
  end_allocate_to_pool(device_, pool_, stream_);
}

void CudaGraph::replay(std::uint64_t seed, std::uint64_t offset) {
  if (capturing_) throw GraphCaptureError("CUDAGraph.replay: the graph is still capturing (call capture_end first)");
  if (exec_ == nullptr) {
    throw GraphCaptureError("CUDAGraph.replay: nothing to replay: the graph was never captured, or reset() freed it");
  }
  KernelLaunch launch(*philox_state_);
  write_philox_state_kernel<<<1, 1, 0, launch.stream()>>>(
      reinterpret_cast<std::uint64_t*>(philox_state_->data_ptr()), seed, offset);
  ADCUDA_CHECK_LAUNCH();
  ADCUDA_CHECK(cudaGraphLaunch(exec_, launch.stream()));
}

bool CudaGraph::update_from(const CudaGraph& other) {
  if (exec_ == nullptr || other.graph_ == nullptr) {
    throw GraphCaptureError("CUDAGraph.update_from: both graphs must hold a capture");
  }
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t status = cudaGraphExecUpdate(exec_, other.graph_, &info);
  if (status == cudaErrorGraphExecUpdateFailure) {
    cudaGetLastError();
    return false;
  }
  ADCUDA_CHECK(status);
  philox_state_ = other.philox_state_;
  return true;
}

void CudaGraph::reset() noexcept {
  if (capturing_) return;
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  cudaGetLastError();
  exec_ = nullptr;
  graph_ = nullptr;
  if (holds_pool_) release_private_pool(device_, pool_);
  holds_pool_ = false;
}

std::size_t CudaGraph::node_count() const {
  if (graph_ == nullptr) return 0;
  std::size_t count = 0;
  ADCUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count));
  return count;
}

}  // namespace adcuda
