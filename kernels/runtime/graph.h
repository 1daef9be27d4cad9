// CUDA graphs by stream capture (PyTorch's CUDAGraph): the work a step queues on the thread's current
// stream is recorded once, instantiated, and replayed with one launch.
//
// - Memory allocated on the capturing stream during the capture comes from a private pool of the
//   caching allocator (allocator.h): the graph's kernels keep writing to those addresses on every
//   replay, so nothing outside the pool may get them while a graph that uses the pool lives. Graphs may
//   share a pool (new_private_pool_id, PyTorch's graph_pool_handle) when they replay in the order they
//   were captured.
// - Random kernels read the Philox seed and offset from device memory during a capture (philox.cuh's
//   PhiloxSource): each replay writes the generator's current seed and offset there first, so that
//   replays draw new numbers, the same ones an eager run would draw at that point.
// - What cannot be captured (a synchronisation, a copy to or from host memory) raises GraphCaptureError
//   naming what was attempted, before CUDA is asked, instead of CUDA's less telling capture errors.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "runtime/device_array.h"

namespace adcuda {

// An illegal call during a capture, or a misuse of a graph (replay before capture, capture twice).
// The bindings turn it into adcuda.cuda.GraphCaptureError (a RuntimeError).
class GraphCaptureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether `stream` is capturing a graph.
bool stream_is_capturing(cudaStream_t stream);
// Raise GraphCaptureError saying that `what` cannot happen while `stream` captures (no-op otherwise).
void refuse_during_capture(cudaStream_t stream, const std::string& what);
// The same while any thread of this process captures (calls that synchronise the whole device).
void refuse_during_any_capture(const std::string& what);

// Where a random kernel launched now on `stream` takes its Philox seed and offset from: the capture's
// device-side state while `stream` captures (the offset passed becomes relative to it), else nothing.
const std::uint64_t* capture_philox_state(cudaStream_t stream);

// A fresh identifier for a private memory pool (never 0).
std::uint64_t new_private_pool_id();

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Starts capturing the calling thread's current stream on the current device, allocating into pool
  // `pool` (0: a new pool of its own). The device is synchronised first, so the capture needs no
  // dependency on work queued before it. `mode` is a cudaStreamCaptureMode.
  void capture_begin(std::uint64_t pool, int mode);
  // Ends the capture and instantiates the graph; on failure (an illegal call invalidated the capture)
  // raises what CUDA said and leaves the graph empty.
  void capture_end();
  // Ends a capture that failed midway, discarding it. No-op when not capturing.
  void abort_capture() noexcept;
  // Launches the graph on the calling thread's current stream, after writing (seed, offset) as the
  // Philox state its random kernels read.
  void replay(std::uint64_t seed, std::uint64_t offset);
  // Replaces the executable graph's kernels' arguments with those of `other` (same topology, same
  // kernels) with cudaGraphExecUpdate; false when CUDA refuses (the graph is then unchanged). The updated
  // kernels use `other`'s memory: keep `other` (and its pool) alive while this graph replays.
  bool update_from(const CudaGraph& other);
  // Frees the graph and lets go of its pool (whose memory returns to the cache once no graph uses it).
  void reset() noexcept;

  bool captured() const noexcept { return exec_ != nullptr; }
  bool capturing() const noexcept { return capturing_; }
  std::uint64_t pool() const noexcept { return pool_; }
  int device() const noexcept { return device_; }
  std::size_t node_count() const;

 private:
  void finish_capture(cudaGraph_t graph) noexcept;

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
  std::uint64_t pool_ = 0;
  bool holds_pool_ = false;
  bool capturing_ = false;
  std::shared_ptr<DeviceArray> philox_state_;  // {seed, offset} read by the random kernels (shared by update_from)
};

}  // namespace adcuda
