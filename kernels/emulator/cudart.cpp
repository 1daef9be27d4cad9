// The CUDA runtime API, as much of it as adcuda's runtime layer calls, for the emulated build: one
// device ("adcuda CUDA emulator") whose memory is host memory. Each stream from cudaStreamCreate* is a
// host thread running its queue in order, so work on different streams overlaps and only events order
// it, as on a GPU: a missing cross-stream wait shows up as a wrong result or a failed test, not as luck.
// The null, legacy and per-thread streams run their work at once on the calling thread.
//
// It keeps the parts of CUDA's behaviour that adcuda's code and tests depend on:
// - device memory is a bounded pool (ADCUDA_EMULATOR_MEMORY_MIB, default 4096) so that out-of-memory
//   paths run; fresh allocations up to 64 MiB are filled with 0xff bytes, so a kernel that reads memory
//   nobody wrote sees NaNs rather than lucky zeros;
// - copies between device memory and pageable host memory are synchronous for the host (the host
//   buffer may be reused when the call returns), copies to and from pinned memory are not;
// - a kernel's fault or deadlock is an asynchronous error, reported once by a later call;
// - every pointer passed to a copy or memset must lie inside one allocation (device or host, tracked
//   here) or be ordinary host memory for the host side of a copy; otherwise the call fails with
//   cudaErrorInvalidValue, as an out-of-range copy faults on a GPU;
// - errors are sticky per host thread until read with cudaGetLastError;
// - launch limits (threads per block, grid size, dynamic shared memory and its opt-in attribute);
// - stream capture (CUDA graphs): while a stream captures, what is queued on it (launches, copies,
//   memsets, host functions) is recorded instead of run, and a stream that waits on an event recorded
//   inside the capture joins it; cudaGraphInstantiate/Launch replay the nodes in the order they were
//   recorded (a valid order: each was queued after what it depends on); cudaGraphExecUpdate takes a
//   graph of the same node kinds and kernels. The calls a driver refuses during a capture fail the same
//   way and invalidate it (cudaErrorStreamCaptureUnsupported, then cudaErrorStreamCaptureInvalidated
//   from the capture's later calls and from cudaStreamEndCapture): synchronising or querying a
//   capturing stream or an event recorded in a capture, cudaDeviceSynchronize and cudaFree while a
//   capture runs, and copies between a capturing stream and pageable host memory.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include <sanitizer/asan_interface.h>

#include "emulator/cudart_state.h"

extern "C" const int warpSize = 32;

namespace adcuda::emu {
namespace {

constexpr std::size_t kDefaultDynamicShared = 48 * 1024;
constexpr std::size_t kMaxDynamicSharedOptIn = 227 * 1024;  // sm_90
constexpr std::size_t kAlignment = 256;
constexpr std::size_t kLargestPoisonedAllocation = 64u << 20;
// The compute capability the device reports: 9.0, or ADCUDA_EMULATOR_COMPUTE_CAPABILITY=<major>.<minor>
// (e.g. 8.0, so that tests see the choices made for other GPUs), read once.
struct ComputeCapability {
  int major = 9, minor = 0;
};

const ComputeCapability& emulated_capability() {
  static const ComputeCapability capability = [] {
    ComputeCapability c;
    const char* text = std::getenv("ADCUDA_EMULATOR_COMPUTE_CAPABILITY");
    int major = 0, minor = 0;
    if (text != nullptr && std::sscanf(text, "%d.%d", &major, &minor) == 2 && major >= 5 && major <= 12 && minor >= 0 &&
        minor <= 9) {
      c.major = major;
      c.minor = minor;
    } else if (text != nullptr && *text != '\0') {
      std::fprintf(stderr, "adcuda emulator: ignoring ADCUDA_EMULATOR_COMPUTE_CAPABILITY=%s (want e.g. 8.0)\n", text);
    }
    return c;
  }();
  return capability;
}
constexpr int kMultiprocessors = 132;

enum class Kind { kDevice, kHost };

struct Allocation {
  std::size_t bytes;
  Kind kind;
};

// A node of a captured graph: the work, and what cudaGraphExecUpdate compares (the kernel of a launch,
// a tag for the other kinds).
struct Node {
  const void* signature;
  std::function<void()> work;
};

// One capture sequence: begun on `origin`; other streams join it by waiting on an event recorded in it.
struct Capture {
  cudaStream_t origin;
  cudaStreamCaptureMode mode;
  std::thread::id thread;
  std::vector<Node> nodes;
  cudaError_t broken = cudaSuccess;  // the illegal call's error, once invalidated
  // Per joined stream: nodes queued on it so far, and how many of those the origin has waited for.
  std::map<cudaStream_t, std::pair<std::size_t, std::size_t>> forked;
};

// Completion is tracked by generation: each cudaEventRecord starts a new one, and the event is done
// when its stream's thread has reached the latest.
// Each record is a generation. An event may be recorded again, on another stream, before an earlier
// record has completed (the runtime recycles its events at once): a wait or query concerns the
// generation that was the latest when it was made, and a later generation completing says nothing
// about an earlier one, so completion is kept per generation.
struct Event {
  std::uint64_t recorded = 0;             // the latest generation
  std::set<std::uint64_t> outstanding;    // generations recorded but not completed yet
  std::uint64_t timed = 0;                // the generation `time` belongs to
  std::chrono::steady_clock::time_point time{};
  bool timing = true;
  // Set while the latest record was made inside a capture: it names a point of the graph, not of a stream.
  std::shared_ptr<Capture> capture;
  cudaStream_t capture_stream = nullptr;
  std::size_t capture_position = 0;  // nodes of capture_stream recorded before it

  bool done(std::uint64_t generation) const { return outstanding.count(generation) == 0; }
};

// A stream: its queue, run in order by its own host thread.
class StreamQueue {
 public:
  StreamQueue() : worker_([this] { run(); }) { worker_.detach(); }

  void submit(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(work));
    wake_.notify_one();
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return tasks_.empty() && !busy_;
  }
  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return tasks_.empty() && !busy_; });
  }

 private:
  // The thread lives as long as the process: streams are never freed (their handles must not be
  // reused), and a thread blocked on its condition variable at exit is harmless.
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return !tasks_.empty(); });
      std::function<void()> work = std::move(tasks_.front());
      tasks_.pop_front();
      busy_ = true;
      lock.unlock();
      work();
      lock.lock();
      busy_ = false;
      if (tasks_.empty()) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  std::thread worker_;
};

struct State {
  std::mutex mutex;
  std::map<std::uintptr_t, Allocation> allocations;  // by start address
  std::size_t device_bytes_in_use = 0;
  std::size_t device_capacity = 0;
  std::unordered_map<cudaStream_t, std::shared_ptr<StreamQueue>> streams;
  // Destroyed streams' queues: their threads live on (blocked, idle), so the queues must too.
  std::vector<std::shared_ptr<StreamQueue>> retired_streams;
  std::unordered_map<cudaEvent_t, std::shared_ptr<Event>> events;
  std::condition_variable event_done;  // with `mutex`
  cudaError_t asynchronous_error = cudaSuccess;
  std::string asynchronous_detail;
  std::unordered_map<const void*, std::size_t> dynamic_shared_limits;
  std::unordered_map<cudaStream_t, std::shared_ptr<Capture>> captures;  // every stream taking part in one
};

State& state() {
  static State* s = [] {
    auto* created = new State;  // never destroyed: other static destructors may still free memory
    const char* mib = std::getenv("ADCUDA_EMULATOR_MEMORY_MIB");
    created->device_capacity = std::size_t(mib ? std::strtoull(mib, nullptr, 10) : 4096) << 20;
    return created;
  }();
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local std::string last_launch_detail;  // what the last failed launch or asynchronous error said
thread_local int current_device_index = 0;

cudaError_t fail(cudaError_t code) {
  last_error = code;
  return code;
}

// The allocation holding [pointer, pointer + bytes), if any.
const Allocation* find(State& s, const void* pointer, std::size_t bytes, std::uintptr_t* start = nullptr) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (address + bytes > it->first + it->second.bytes || address < it->first) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

void* allocate(std::size_t bytes) {
  const std::size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* pointer = std::aligned_alloc(kAlignment, rounded);
  // Large blocks stay unpoisoned: touching every page of a multi-GiB allocation costs seconds.
  if (pointer && rounded <= kLargestPoisonedAllocation) std::memset(pointer, 0xff, rounded);
  // Under AddressSanitizer the rounding must not hide an overrun: the bytes past the requested size
  // are unaddressable (the block itself stays 256-byte aligned, as cudaMalloc's are).
  if (pointer) ASAN_POISON_MEMORY_REGION(static_cast<unsigned char*>(pointer) + bytes, rounded - bytes);
  return pointer;
}

// A range that a copy reads or writes: inside one tracked allocation, or (when `host_ok`) untracked
// host memory, which the emulator cannot check.
bool range_ok(State& s, const void* pointer, std::size_t bytes, bool host_ok) {
  if (bytes == 0) return true;
  if (find(s, pointer, bytes)) return true;
  if (!host_ok) return false;
  // Untracked memory overlapping a tracked allocation is an overrun of that allocation.
  std::uintptr_t start = 0;
  return find(s, pointer, 1, &start) == nullptr;
}

bool is_immediate(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

bool stream_ok(State& s, cudaStream_t stream) { return is_immediate(stream) || s.streams.count(stream); }

// The queue of a created stream (nullptr for the immediate ones). Call with s.mutex held.
std::shared_ptr<StreamQueue> queue_of(State& s, cudaStream_t stream) {
  if (is_immediate(stream)) return nullptr;
  auto it = s.streams.find(stream);
  return it == s.streams.end() ? nullptr : it->second;
}

// Reports (once) an asynchronous error to the calling thread, as CUDA calls that return errors do.
cudaError_t take_asynchronous_error(State& s) {
  if (s.asynchronous_error == cudaSuccess) return cudaSuccess;
  const cudaError_t error = s.asynchronous_error;
  s.asynchronous_error = cudaSuccess;
  last_launch_detail = s.asynchronous_detail;
  last_error = error;
  return error;
}

void wait_all_streams(State& s) {
  std::vector<std::shared_ptr<StreamQueue>> queues;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& entry : s.streams) queues.push_back(entry.second);
  }
  for (auto& queue : queues) queue->wait_idle();
}

// Tags for the nodes that are not kernel launches (what cudaGraphExecUpdate compares them by).
const char kNodeKinds[3] = {};
const void* const kCopyNode = &kNodeKinds[0];
const void* const kMemsetNode = &kNodeKinds[1];
const void* const kGraphNode = &kNodeKinds[2];

bool is_kernel_node(const void* signature) {
  return signature != nullptr &&
         (signature < static_cast<const void*>(kNodeKinds) || signature >= static_cast<const void*>(kNodeKinds + 3));
}

// The capture `stream` takes part in, if any. Call with s.mutex held.
std::shared_ptr<Capture> capture_of(State& s, cudaStream_t stream) {
  auto it = s.captures.find(stream);
  return it == s.captures.end() ? nullptr : it->second;
}

// A capture that has not ended (an event may still point to an ended one). Call with s.mutex held.
bool capture_running(State& s, const std::shared_ptr<Capture>& capture) {
  return capture != nullptr && capture_of(s, capture->origin) == capture;
}

// A call the driver refuses during `capture`: the capture is invalidated and the call fails.
cudaError_t refuse_during(Capture& capture) {
  if (capture.broken == cudaSuccess) capture.broken = cudaErrorStreamCaptureInvalidated;
  return fail(cudaErrorStreamCaptureUnsupported);
}

// A potentially unsafe call (one that synchronises implicitly): refused, invalidating the captures it
// would break, while a capture in global mode runs on any thread or one in thread-local mode on this one.
cudaError_t refuse_unsafe_call(State& s) {
  cudaError_t result = cudaSuccess;
  for (auto& entry : s.captures) {
    Capture& capture = *entry.second;
    const bool forbidden = capture.mode == cudaStreamCaptureModeGlobal ||
                           (capture.mode == cudaStreamCaptureModeThreadLocal && capture.thread == std::this_thread::get_id());
    if (forbidden) result = refuse_during(capture);
  }
  return result;
}

// Queues `work` into `capture` as a node of `stream`. Call with s.mutex held.
cudaError_t record_node(Capture& capture, cudaStream_t stream, const void* signature, std::function<void()> work) {
  if (capture.broken != cudaSuccess) return cudaErrorStreamCaptureInvalidated;
  capture.nodes.push_back({signature, std::move(work)});
  if (stream != capture.origin) capture.forked[stream].first += 1;
  return cudaSuccess;
}

}  // namespace

std::size_t max_dynamic_shared_bytes(const void* kernel) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.dynamic_shared_limits.find(kernel);
  return it == s.dynamic_shared_limits.end() ? kDefaultDynamicShared : it->second;
}

void record_launch_error(cudaError_t code, const char* detail) {
  last_error = code;
  last_launch_detail = detail;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work, const void* signature) {
  State& s = state();
  std::shared_ptr<StreamQueue> queue;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!stream_ok(s, stream)) return cudaErrorInvalidResourceHandle;
    if (std::shared_ptr<Capture> capture = capture_of(s, stream)) {
      return record_node(*capture, stream, signature, std::move(work));
    }
    queue = queue_of(s, stream);
  }
  if (queue) {
    queue->submit(std::move(work));
  } else {
    work();
  }
  return cudaSuccess;
}

void record_asynchronous_error(cudaError_t code, const char* detail) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.asynchronous_error != cudaSuccess) return;  // the first failure is the one worth reporting
  s.asynchronous_error = code;
  s.asynchronous_detail = detail;
}

}  // namespace adcuda::emu

using adcuda::emu::fail;
using adcuda::emu::state;

// The graph handles, opaque in the CUDA headers: a captured graph and its executable form hold the nodes
// in the order they were recorded (shared, so that a launch in flight keeps the ones it started with).
struct CUgraph_st {
  std::shared_ptr<const std::vector<adcuda::emu::Node>> nodes;
};
struct CUgraphExec_st {
  std::shared_ptr<const std::vector<adcuda::emu::Node>> nodes;
};

extern "C" {

cudaError_t cudaGetLastError() {
  adcuda::emu::take_asynchronous_error(state());
  const cudaError_t error = adcuda::emu::last_error;
  adcuda::emu::last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  adcuda::emu::take_asynchronous_error(state());
  return adcuda::emu::last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchFailure:
      // The emulator knows what went wrong; the returned text lives until the next failed launch.
      if (!adcuda::emu::last_launch_detail.empty()) {
        return adcuda::emu::last_launch_detail.c_str();
      }
      return error == cudaErrorLaunchFailure ? "unspecified launch failure" : "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    // The driver's texts.
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorGraphExecUpdateFailure:
      return "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
    default: return "unknown error";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = adcuda::emu::current_device_index;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  adcuda::emu::current_device_index = device;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "adcuda CUDA emulator (host CPU, not a GPU)");
  prop->major = adcuda::emu::emulated_capability().major;
  prop->minor = adcuda::emu::emulated_capability().minor;
  prop->totalGlobalMem = state().device_capacity;
  prop->multiProcessorCount = adcuda::emu::kMultiprocessors;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = adcuda::emu::kDefaultDynamicShared;
  prop->sharedMemPerBlockOptin = adcuda::emu::kMaxDynamicSharedOptIn;
  prop->l2CacheSize = 50 << 20;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attribute) {
    case cudaDevAttrMultiProcessorCount: *value = adcuda::emu::kMultiprocessors; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(adcuda::emu::kMaxDynamicSharedOptIn); break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(adcuda::emu::kDefaultDynamicShared); break;
    case cudaDevAttrComputeCapabilityMajor: *value = adcuda::emu::emulated_capability().major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = adcuda::emu::emulated_capability().minor; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    default: return fail(cudaErrorNotSupported);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (adcuda::emu::refuse_unsafe_call(s) != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  }
  adcuda::emu::wait_all_streams(s);
  std::lock_guard<std::mutex> lock(s.mutex);
  return adcuda::emu::take_asynchronous_error(s);
}

// Every kernel of the emulated build is "compiled" for the compute capability the device reports.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* func) {
  if (attributes == nullptr || func == nullptr) return fail(cudaErrorInvalidValue);
  *attributes = cudaFuncAttributes{};
  attributes->maxThreadsPerBlock = 1024;
  attributes->maxDynamicSharedSizeBytes = int(adcuda::emu::kDefaultDynamicShared);
  attributes->binaryVersion = adcuda::emu::emulated_capability().major * 10 + adcuda::emu::emulated_capability().minor;
  attributes->ptxVersion = attributes->binaryVersion;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || std::size_t(value) > adcuda::emu::kMaxDynamicSharedOptIn) return fail(cudaErrorInvalidValue);
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.dynamic_shared_limits[func] = std::size_t(value);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, std::size_t bytes) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *pointer = nullptr;
  if (bytes > s.device_capacity - s.device_bytes_in_use) return fail(cudaErrorMemoryAllocation);
  void* memory = adcuda::emu::allocate(bytes);
  if (!memory) return fail(cudaErrorMemoryAllocation);
  s.allocations[reinterpret_cast<std::uintptr_t>(memory)] = {bytes, adcuda::emu::Kind::kDevice};
  s.device_bytes_in_use += bytes;
  *pointer = memory;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  if (!pointer) return cudaSuccess;  // cudaFree(nullptr) initialises the context
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (adcuda::emu::refuse_unsafe_call(s) != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  }
  adcuda::emu::wait_all_streams(s);  // cudaFree synchronises: queued work may still use the memory
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == s.allocations.end() || it->second.kind != adcuda::emu::Kind::kDevice) return fail(cudaErrorInvalidValue);
  s.device_bytes_in_use -= it->second.bytes;
  s.allocations.erase(it);
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** pointer, std::size_t bytes, unsigned int /*flags*/) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  void* memory = adcuda::emu::allocate(bytes);
  if (!memory) {
    *pointer = nullptr;
    return fail(cudaErrorMemoryAllocation);
  }
  s.allocations[reinterpret_cast<std::uintptr_t>(memory)] = {bytes, adcuda::emu::Kind::kHost};
  *pointer = memory;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** pointer, std::size_t bytes) { return cudaHostAlloc(pointer, bytes, 0); }

cudaError_t cudaFreeHost(void* pointer) {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (adcuda::emu::refuse_unsafe_call(s) != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  }
  adcuda::emu::wait_all_streams(s);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == s.allocations.end() || it->second.kind != adcuda::emu::Kind::kHost) return fail(cudaErrorInvalidValue);
  s.allocations.erase(it);
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *total_bytes = s.device_capacity;
  *free_bytes = s.device_capacity - s.device_bytes_in_use;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *attributes = cudaPointerAttributes{};
  const adcuda::emu::Allocation* allocation = adcuda::emu::find(s, pointer, 1);
  if (!allocation) {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -1;
    return cudaSuccess;
  }
  const bool device = allocation->kind == adcuda::emu::Kind::kDevice;
  attributes->type = device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
  attributes->device = 0;
  attributes->devicePointer = const_cast<void*>(pointer);
  attributes->hostPointer = device ? nullptr : const_cast<void*>(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  auto& s = state();
  std::shared_ptr<adcuda::emu::StreamQueue> queue;
  bool pageable_source = false;
  bool pageable_destination = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    const bool dst_host_ok = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault;
    const bool src_host_ok = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault;
    if (!adcuda::emu::range_ok(s, dst, bytes, dst_host_ok) || !adcuda::emu::range_ok(s, src, bytes, src_host_ok)) {
      return fail(cudaErrorInvalidValue);
    }
    pageable_source = bytes && !adcuda::emu::find(s, src, bytes);
    pageable_destination = bytes && !adcuda::emu::find(s, dst, bytes);
    if (std::shared_ptr<adcuda::emu::Capture> capture = adcuda::emu::capture_of(s, stream)) {
      // A graph cannot hold a copy to or from pageable memory (it is synchronous, or staged now).
      if (pageable_source || pageable_destination) return adcuda::emu::refuse_during(*capture);
      const cudaError_t recorded = adcuda::emu::record_node(
          *capture, stream, adcuda::emu::kCopyNode, [dst, src, bytes] { std::memmove(dst, src, bytes); });
      return recorded == cudaSuccess ? cudaSuccess : fail(recorded);
    }
    queue = adcuda::emu::queue_of(s, stream);
  }
  if (bytes == 0) return cudaSuccess;
  if (!queue) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (pageable_destination) {
    // Into pageable memory the copy is synchronous: the data is there when the call returns.
    queue->submit([dst, src, bytes] { std::memmove(dst, src, bytes); });
    queue->wait_idle();
  } else if (pageable_source) {
    // From pageable memory CUDA stages the data before returning, so the caller may reuse its buffer.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + bytes);
    queue->submit([dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    queue->submit([dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes,
                                cudaStream_t stream) {
  if (dst_device != 0 || src_device != 0) return fail(cudaErrorInvalidDevice);
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}

cudaError_t cudaMemsetAsync(void* pointer, int value, std::size_t bytes, cudaStream_t stream) {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    if (!adcuda::emu::range_ok(s, pointer, bytes, false)) return fail(cudaErrorInvalidValue);
  }
  if (bytes == 0) return cudaSuccess;
  const cudaError_t queued = adcuda::emu::enqueue(
      stream, [pointer, value, bytes] { std::memset(pointer, value, bytes); }, adcuda::emu::kMemsetNode);
  return queued == cudaSuccess ? cudaSuccess : fail(queued);
}

// Queued like any stream work (the ASan build's caching allocator moves a block's addressable bytes in
// stream order with it).
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t function, void* user_data) {
  const cudaError_t queued = adcuda::emu::enqueue(
      stream, [function, user_data] { function(user_data); }, reinterpret_cast<const void*>(function));
  return queued == cudaSuccess ? cudaSuccess : fail(queued);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // A distinct, never reused address per stream: the caching allocator keys free lists by handle.
  *stream = reinterpret_cast<cudaStream_t>(new char);
  s.streams[*stream] = std::make_shared<adcuda::emu::StreamQueue>();
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  auto& s = state();
  std::shared_ptr<adcuda::emu::StreamQueue> queue;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.streams.find(stream);
    if (it == s.streams.end()) return fail(cudaErrorInvalidResourceHandle);
    queue = it->second;
    s.streams.erase(it);
    s.retired_streams.push_back(queue);
  }
  queue->wait_idle();  // as on a GPU, work already queued still runs
  return cudaSuccess;  // the handle's memory is kept so its address never names another stream
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  auto& s = state();
  std::shared_ptr<adcuda::emu::StreamQueue> queue;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    if (auto capture = adcuda::emu::capture_of(s, stream)) return adcuda::emu::refuse_during(*capture);
    queue = adcuda::emu::queue_of(s, stream);
  }
  if (queue && !queue->idle()) return cudaErrorNotReady;
  std::lock_guard<std::mutex> lock(s.mutex);
  return adcuda::emu::take_asynchronous_error(s);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto& s = state();
  std::shared_ptr<adcuda::emu::StreamQueue> queue;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    if (auto capture = adcuda::emu::capture_of(s, stream)) return adcuda::emu::refuse_during(*capture);
    queue = adcuda::emu::queue_of(s, stream);
  }
  if (queue) queue->wait_idle();
  std::lock_guard<std::mutex> lock(s.mutex);
  return adcuda::emu::take_asynchronous_error(s);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *event = reinterpret_cast<cudaEvent_t>(new char);
  auto created = std::make_shared<adcuda::emu::Event>();
  created->timing = (flags & cudaEventDisableTiming) == 0;
  s.events[*event] = created;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.events.erase(event)) return fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(event);  // queued work holds its own reference to the event's state
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto& s = state();
  std::shared_ptr<adcuda::emu::Event> recorded;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.events.find(event);
    if (it == s.events.end() || !adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    recorded = it->second;
    if (std::shared_ptr<adcuda::emu::Capture> capture = adcuda::emu::capture_of(s, stream)) {
      // Inside a capture the event marks a point of the graph, for streams that wait on it to join.
      if (capture->broken != cudaSuccess) return fail(cudaErrorStreamCaptureInvalidated);
      recorded->capture = capture;
      recorded->capture_stream = stream;
      recorded->capture_position = stream == capture->origin ? 0 : capture->forked[stream].first;
      return cudaSuccess;
    }
    recorded->capture = nullptr;
    generation = ++recorded->recorded;
    recorded->outstanding.insert(generation);
  }
  adcuda::emu::enqueue(stream, [recorded, generation] {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    recorded->outstanding.erase(generation);
    if (recorded->timed < generation) {
      recorded->timed = generation;
      recorded->time = std::chrono::steady_clock::now();
    }
    st.event_done.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.events.find(event);
  if (it == s.events.end()) return fail(cudaErrorInvalidResourceHandle);
  if (adcuda::emu::capture_running(s, it->second->capture)) return adcuda::emu::refuse_during(*it->second->capture);
  if (!it->second->done(it->second->recorded)) return cudaErrorNotReady;
  return adcuda::emu::take_asynchronous_error(s);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  auto& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  auto it = s.events.find(event);
  if (it == s.events.end()) return fail(cudaErrorInvalidResourceHandle);
  if (adcuda::emu::capture_running(s, it->second->capture)) return adcuda::emu::refuse_during(*it->second->capture);
  std::shared_ptr<adcuda::emu::Event> waited = it->second;
  const std::uint64_t generation = waited->recorded;
  s.event_done.wait(lock, [&] { return waited->done(generation); });
  return adcuda::emu::take_asynchronous_error(s);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  auto& s = state();
  std::shared_ptr<adcuda::emu::Event> waited;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.events.find(event);
    if (it == s.events.end() || !adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    waited = it->second;
    std::shared_ptr<adcuda::emu::Capture> capture = adcuda::emu::capture_of(s, stream);
    if (adcuda::emu::capture_running(s, waited->capture)) {
      std::shared_ptr<adcuda::emu::Capture>& source = waited->capture;
      if (capture == nullptr) {
        // Forked: the stream joins the capture (its work is recorded, in order after what it waited for).
        s.captures[stream] = source;
        source->forked[stream];
        return cudaSuccess;
      }
      if (capture != source) return fail(cudaErrorStreamCaptureMerge);
      if (stream == source->origin && waited->capture_stream != source->origin) {
        auto& counts = source->forked[waited->capture_stream];
        counts.second = std::max(counts.second, waited->capture_position);  // joined back up to here
      }
      return cudaSuccess;
    }
    generation = waited->recorded;  // the event's state now: a later record does not count
    if (capture != nullptr && generation != 0) {
      // Work outside the capture cannot be a dependency of the graph.
      if (capture->broken == cudaSuccess) capture->broken = cudaErrorStreamCaptureInvalidated;
      return fail(cudaErrorStreamCaptureIsolation);
    }
  }
  if (generation == 0) return cudaSuccess;  // never recorded: nothing to wait for
  adcuda::emu::enqueue(stream, [waited, generation] {
    auto& st = state();
    std::unique_lock<std::mutex> lock(st.mutex);
    st.event_done.wait(lock, [&] { return waited->done(generation); });
  });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto a = s.events.find(start);
  auto b = s.events.find(end);
  if (a == s.events.end() || b == s.events.end()) return fail(cudaErrorInvalidResourceHandle);
  const adcuda::emu::Event& first = *a->second;
  const adcuda::emu::Event& second = *b->second;
  if (!first.timing || !second.timing || first.recorded == 0 || second.recorded == 0) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (!first.done(first.recorded) || !second.done(second.recorded)) return cudaErrorNotReady;
  *milliseconds = std::chrono::duration<float, std::milli>(second.time - first.time).count();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
  if (adcuda::emu::is_immediate(stream)) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot
  if (adcuda::emu::capture_of(s, stream)) return fail(cudaErrorIllegalState);
  auto capture = std::make_shared<adcuda::emu::Capture>();
  capture->origin = stream;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  s.captures[stream] = capture;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *graph = nullptr;
  std::shared_ptr<adcuda::emu::Capture> capture = adcuda::emu::capture_of(s, stream);
  if (capture == nullptr) return fail(cudaErrorIllegalState);
  if (stream != capture->origin) return fail(cudaErrorStreamCaptureUnmatched);
  if (capture->mode != cudaStreamCaptureModeRelaxed && capture->thread != std::this_thread::get_id()) {
    return fail(cudaErrorStreamCaptureWrongThread);
  }
  for (auto it = s.captures.begin(); it != s.captures.end();) {
    it = it->second == capture ? s.captures.erase(it) : std::next(it);
  }
  if (capture->broken != cudaSuccess) return fail(capture->broken);
  for (const auto& entry : capture->forked) {
    if (entry.second.first > entry.second.second) return fail(cudaErrorStreamCaptureUnjoined);
  }
  *graph = new CUgraph_st{std::make_shared<const std::vector<adcuda::emu::Node>>(std::move(capture->nodes))};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!adcuda::emu::stream_ok(s, stream)) return fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<adcuda::emu::Capture> capture = adcuda::emu::capture_of(s, stream);
  if (capture == nullptr) {
    *status = cudaStreamCaptureStatusNone;
  } else {
    *status = capture->broken == cudaSuccess ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusInvalidated;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, std::size_t* count) {
  if (graph == nullptr || count == nullptr) return fail(cudaErrorInvalidValue);
  if (nodes != nullptr) return fail(cudaErrorNotSupported);  // the emulator has no node handles; counts only
  *count = graph->nodes->size();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long /*flags*/) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  const cudaError_t queued = adcuda::emu::enqueue(
      stream,
      [nodes = exec->nodes] {
        for (const adcuda::emu::Node& node : *nodes) node.work();
      },
      adcuda::emu::kGraphNode);
  return queued == cudaSuccess ? cudaSuccess : fail(queued);
}

// As a driver allows: the same nodes in the same order, each launch of the same kernel (its arguments,
// the copies' addresses and sizes may change).
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  cudaGraphExecUpdateResultInfo result{};
  result.result = cudaGraphExecUpdateSuccess;
  const auto& before = *exec->nodes;
  const auto& after = *graph->nodes;
  if (before.size() != after.size()) {
    result.result = cudaGraphExecUpdateErrorTopologyChanged;
  } else {
    for (std::size_t i = 0; i < before.size() && result.result == cudaGraphExecUpdateSuccess; ++i) {
      if (before[i].signature == after[i].signature) continue;
      const bool kernels = adcuda::emu::is_kernel_node(before[i].signature) && adcuda::emu::is_kernel_node(after[i].signature);
      result.result = kernels ? cudaGraphExecUpdateErrorFunctionChanged : cudaGraphExecUpdateErrorNodeTypeChanged;
    }
  }
  if (info != nullptr) *info = result;
  if (result.result != cudaGraphExecUpdateSuccess) return fail(cudaErrorGraphExecUpdateFailure);
  exec->nodes = graph->nodes;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // a launch in flight holds its own reference to the nodes
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
