// Streams and events. Every thread that launches work gets its own non-blocking stream per device,
// created on first use, so threads training side by side never serialise on one queue; work is
// ordered between streams only through events (stream_wait_stream), never by timing.
//
// Streams are never destroyed: a thread's stream goes back to a pool when the thread exits and is
// handed to the next thread (or adcuda.cuda.Stream) that needs one. The caching allocator keys its
// free lists by stream handle, so a handle must never come to mean another stream.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace adcuda {

// The calling thread's own stream on `device`.
cudaStream_t thread_stream(int device);
// Where the calling thread's work on `device` goes: the stream set with exchange_current_stream (the
// Python `with adcuda.cuda.stream(s):`), else the thread's own stream.
cudaStream_t current_stream(int device);
// The same on the thread's current device.
cudaStream_t current_stream();
// Make `stream` the thread's current stream on `device` (nullptr: back to the thread's own stream);
// returns the previous setting (nullptr if there was none).
cudaStream_t exchange_current_stream(int device, cudaStream_t stream);

// A stream from the pool for adcuda.cuda.Stream(); give it back with release_stream.
cudaStream_t acquire_stream(int device);
void release_stream(int device, cudaStream_t stream);
// How many streams of `device` wait in the pool (test support: a thread's stream comes back in a
// thread-exit handler, which may run after Python's join() has returned).
std::size_t pooled_stream_count(int device);

// Recycled events without timing, created on `device`: for ordering streams.
cudaEvent_t acquire_event(int device);
void release_event(int device, cudaEvent_t event);

// `waiter` runs its later work only after everything queued on `producer` so far (an event recorded on
// `producer`, which lives on `producer_device`). Does not block the host.
void stream_wait_stream(cudaStream_t waiter, cudaStream_t producer, int producer_device);

// Makes `device` the thread's current CUDA device for a scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
  int device_;
};

}  // namespace adcuda
