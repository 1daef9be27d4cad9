// What the emulated launches (grid.cpp) need from the emulated CUDA runtime (cudart.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace adcuda::emu {

// The dynamic shared memory a launch of `kernel` may ask for: 48 KiB unless raised with
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ...), as on a GPU.
std::size_t max_dynamic_shared_bytes(const void* kernel);

// A failed launch: cudaGetLastError on this host thread returns `code` next; cudaGetErrorString
// returns `detail` for it, so the Python exception says what went wrong.
void record_launch_error(cudaError_t code, const char* detail);

// Runs `work` on `stream` after the work queued there before: on the stream's own host thread for a
// stream from cudaStreamCreate*, at once on the calling thread for the null/legacy/per-thread streams.
// While the stream captures a graph the work is recorded as a node instead (run by each launch of the
// graph); `signature` says what kind of node it is (the kernel for a launch), which cudaGraphExecUpdate
// compares. Fails (nothing queued) for an unknown or destroyed stream (cudaErrorInvalidResourceHandle) or
// a capture that an illegal call broke (cudaErrorStreamCaptureInvalidated).
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work, const void* signature = nullptr);

// A failure while queued work ran (a kernel's fault or deadlock): the next CUDA call that reports
// errors, on any host thread, returns `code` once, with `detail` as its error string.
void record_asynchronous_error(cudaError_t code, const char* detail);

}  // namespace adcuda::emu
