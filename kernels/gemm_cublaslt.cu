// cuBLASLt behind `matmul`, loaded at run time: the module neither links nor needs cuBLAS. The
// library comes from the nvidia-cublas wheel (`pip install adcuda[cublas]`) or a CUDA toolkit; the
// Python side (adcuda/backends/cuda/gemm.py) finds the candidates and asks cublaslt_load to open one.
//
// The local toolkit ships no cublasLt.h, so the small part of its C API called here is declared below:
// the functions by their documented signatures, the enumerators with their documented values (the
// library's ABI, stable across releases), and the semi-opaque structs with their documented sizes.
//
// Layout: cuBLAS is column-major, adcuda row-major. The row-major (M, N) product C = A @ B is the
// column-major (N, M) product C^T = B^T @ A^T, so cuBLAS's "A" is our B and its "B" our A; an operand
// whose stride is 1 along its second dim (row-major) is cuBLAS's untransposed column-major matrix of
// the swapped shape, one with stride 1 along its first dim is the transposed one. The bias (one value
// per output column of ours) is one value per row of cuBLAS's D, which is what its BIAS epilogues add.
#include "gemm_cublaslt.h"

#include <dlfcn.h>
#include <library_types.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/errors.h"

namespace adcuda {
namespace {

// ---- the declared subset of cublasLt.h -------------------------------------------------------------
using cublasStatus_t = int;
constexpr cublasStatus_t kCublasSuccess = 0;
using cublasLtHandle_t = struct cublasLtContext*;
struct cublasLtMatrixLayoutOpaque_t { std::uint64_t data[8]; };
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulDescOpaque_t { std::uint64_t data[32]; };
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
struct cublasLtMatmulPreferenceOpaque_t { std::uint64_t data[8]; };
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t*;
struct cublasLtMatmulAlgo_t { std::uint64_t data[8]; };
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

// cublasComputeType_t
constexpr int kComputeF32 = 68;
constexpr int kComputeF64 = 70;
// cublasOperation_t
constexpr std::int32_t kOpN = 0;
constexpr std::int32_t kOpT = 1;
// cublasLtMatmulDescAttributes_t
constexpr int kDescTransA = 3;
constexpr int kDescTransB = 4;
constexpr int kDescEpilogue = 7;
constexpr int kDescBiasPointer = 8;
constexpr int kDescBiasBatchStride = 10;
constexpr int kDescAuxPointer = 11;
constexpr int kDescAuxLd = 12;
constexpr int kDescAuxBatchStride = 13;
// cublasLtEpilogue_t
constexpr std::uint32_t kEpilogueDefault = 1;
constexpr std::uint32_t kEpilogueBias = 4;
constexpr std::uint32_t kEpilogueGelu = 32;
constexpr std::uint32_t kEpilogueGeluAux = 160;
constexpr std::uint32_t kEpilogueGeluBias = 36;
constexpr std::uint32_t kEpilogueGeluAuxBias = 164;
// cublasLtMatrixLayoutAttribute_t
constexpr int kLayoutBatchCount = 5;
constexpr int kLayoutBatchStride = 6;
// cublasLtMatmulPreferenceAttributes_t
constexpr int kPreferenceMaxWorkspace = 1;
constexpr int kPreferenceAlignmentA = 5;
constexpr int kPreferenceAlignmentB = 6;
constexpr int kPreferenceAlignmentC = 7;
constexpr int kPreferenceAlignmentD = 8;

struct CublasLtApi {
  std::size_t (*GetVersion)();
  cublasStatus_t (*Create)(cublasLtHandle_t*);
  cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t*, int, cudaDataType_t);
  cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t, int, const void*, std::size_t);
  cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t*, cudaDataType_t, std::uint64_t, std::uint64_t,
                                       std::int64_t);
  cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*MatrixLayoutSetAttribute)(cublasLtMatrixLayout_t, int, const void*, std::size_t);
  cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int, const void*, std::size_t);
  cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                           cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                           cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t*, int*);
  cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, std::size_t, cudaStream_t);
  const char* (*GetStatusString)(cublasStatus_t);
};

// The process's loaded library: set once under the mutex, never unloaded.
struct Library {
  std::mutex mutex;
  CublasLtStatus status;
  CublasLtApi api{};
  std::map<int, cublasLtHandle_t> handles;  // per device
};

Library& library() {
  static Library instance;
  return instance;
}

template <typename Function>
bool resolve(void* handle, const char* name, Function& out, std::string& missing) {
  out = reinterpret_cast<Function>(dlsym(handle, name));
  if (out == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  return out != nullptr;
}

// Opens `candidate` and resolves every function; on failure says why and leaves nothing loaded.
bool open_library(const std::string& candidate, CublasLtApi& api, std::string& why) {
  void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    why = error != nullptr ? error : "dlopen failed";
    return false;
  }
  std::string missing;
  resolve(handle, "cublasLtGetVersion", api.GetVersion, missing);
  resolve(handle, "cublasLtCreate", api.Create, missing);
  resolve(handle, "cublasLtMatmulDescCreate", api.MatmulDescCreate, missing);
  resolve(handle, "cublasLtMatmulDescDestroy", api.MatmulDescDestroy, missing);
  resolve(handle, "cublasLtMatmulDescSetAttribute", api.MatmulDescSetAttribute, missing);
  resolve(handle, "cublasLtMatrixLayoutCreate", api.MatrixLayoutCreate, missing);
  resolve(handle, "cublasLtMatrixLayoutDestroy", api.MatrixLayoutDestroy, missing);
  resolve(handle, "cublasLtMatrixLayoutSetAttribute", api.MatrixLayoutSetAttribute, missing);
  resolve(handle, "cublasLtMatmulPreferenceCreate", api.MatmulPreferenceCreate, missing);
  resolve(handle, "cublasLtMatmulPreferenceDestroy", api.MatmulPreferenceDestroy, missing);
  resolve(handle, "cublasLtMatmulPreferenceSetAttribute", api.MatmulPreferenceSetAttribute, missing);
  resolve(handle, "cublasLtMatmulAlgoGetHeuristic", api.MatmulAlgoGetHeuristic, missing);
  resolve(handle, "cublasLtMatmul", api.Matmul, missing);
  resolve(handle, "cublasLtGetStatusString", api.GetStatusString, missing);
  if (!missing.empty()) {
    why = "it lacks " + missing;
    dlclose(handle);
    return false;
  }
  return true;
}

std::string version_text(std::size_t version) {
  // cublasLtGetVersion: major * 10000 + minor * 100 + patch
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

}  // namespace

CublasLtStatus cublaslt_load(const std::vector<std::string>& candidates) {
  Library& lib = library();
  std::lock_guard<std::mutex> lock(lib.mutex);
  if (lib.status.loaded) return lib.status;
  std::string reasons;
  for (const std::string& candidate : candidates) {
    CublasLtApi api{};
    std::string why;
    if (open_library(candidate, api, why)) {
      lib.api = api;
      lib.status.loaded = true;
      lib.status.path = candidate;
      lib.status.version = version_text(api.GetVersion());
      lib.status.error.clear();
      return lib.status;
    }
    // dlerror names the file itself when it cannot open it
    reasons += (reasons.empty() ? "" : "; ") + (why.rfind(candidate, 0) == 0 ? why : candidate + ": " + why);
  }
  lib.status.error = candidates.empty() ? "no candidate library to try" : reasons;
  return lib.status;
}

CublasLtStatus cublaslt_status() {
  Library& lib = library();
  std::lock_guard<std::mutex> lock(lib.mutex);
  return lib.status;
}

#if defined(ADCUDA_EMULATION)

// Emulated device memory is host memory no real library can read: the hand-written kernels run.
bool cublaslt_matmul(const GemmArgs&, ScalarType, int, cudaStream_t) { return false; }

#else

namespace {

[[noreturn]] void fail(const CublasLtApi& api, cublasStatus_t status, const char* call) {
  throw std::runtime_error(std::string("matmul: cuBLASLt ") + call + " failed: " + api.GetStatusString(status) +
                           " (status " + std::to_string(status) + ")");
}

#define ADCUDA_CUBLASLT_CHECK(api, call)                   \
  do {                                                      \
    const cublasStatus_t adcuda_status_ = (call);           \
    if (adcuda_status_ != kCublasSuccess) fail(api, adcuda_status_, #call); \
  } while (0)

// One cuBLAS operand: a column-major rows x cols matrix with leading dimension ld, op N or T.
struct Operand {
  std::uint64_t rows, cols;
  std::int64_t ld;
  std::int32_t op;
};

// Our row-major (first x second) operand with strides (stride_first, stride_second), seen by cuBLAS as
// the op(X) of shape (second x first). False when neither stride is (usably) 1.
bool as_column_major(std::int64_t first, std::int64_t second, std::int64_t stride_first, std::int64_t stride_second,
                     Operand& out) {
  if (second == 1 || stride_second == 1) {
    // row-major: stored as the column-major (second x first) matrix, columns stride_first apart
    const std::int64_t ld = first == 1 ? second : stride_first;
    if (ld < second) return false;
    out = {static_cast<std::uint64_t>(second), static_cast<std::uint64_t>(first), ld, kOpN};
    return true;
  }
  if (first == 1 || stride_first == 1) {
    // column-major (first x second), transposed in the product
    const std::int64_t ld = second == 1 ? first : stride_second;
    if (ld < first) return false;
    out = {static_cast<std::uint64_t>(first), static_cast<std::uint64_t>(second), ld, kOpT};
    return true;
  }
  return false;
}

int alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  int alignment = 16;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

cudaDataType_t cuda_type(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float16: return CUDA_R_16F;
    case ScalarType::BFloat16: return CUDA_R_16BF;
    case ScalarType::Float32: return CUDA_R_32F;
    default: return CUDA_R_64F;
  }
}

// What an algorithm choice depends on: shapes, layouts, batch, dtype, epilogue, alignments.
using AlgoKey = std::tuple<int, int, std::uint64_t, std::uint64_t, std::uint64_t, std::int64_t, std::int64_t, int, int,
                           std::int64_t, std::int64_t, std::int64_t, std::uint32_t, int, int, int, int>;

// RAII for the descriptors of one call.
struct Descriptors {
  const CublasLtApi& api;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  explicit Descriptors(const CublasLtApi& lt) : api(lt) {}
  ~Descriptors() {
    if (preference != nullptr) api.MatmulPreferenceDestroy(preference);
    if (c != nullptr) api.MatrixLayoutDestroy(c);
    if (b != nullptr) api.MatrixLayoutDestroy(b);
    if (a != nullptr) api.MatrixLayoutDestroy(a);
    if (desc != nullptr) api.MatmulDescDestroy(desc);
  }
};

constexpr std::size_t kMaxWorkspaceBytes = 32u << 20;  // as PyTorch gives cuBLASLt on Hopper

}  // namespace

bool cublaslt_matmul(const GemmArgs& args, ScalarType dtype, int device, cudaStream_t stream) {
  Library& lib = library();
  cublasLtHandle_t handle;
  {
    std::lock_guard<std::mutex> lock(lib.mutex);
    if (!lib.status.loaded) return false;
    auto found = lib.handles.find(device);
    if (found == lib.handles.end()) {
      cublasLtHandle_t created = nullptr;
      ADCUDA_CUBLASLT_CHECK(lib.api, lib.api.Create(&created));
      found = lib.handles.emplace(device, created).first;
    }
    handle = found->second;
  }
  const CublasLtApi& api = lib.api;

  // cuBLAS "A" is our B (K x N), its "B" our A (M x K); D is our C: column-major N x M, ld N.
  Operand lt_a, lt_b;
  if (!as_column_major(args.K, args.N, args.b_stride_k, args.b_stride_n, lt_a)) return false;
  if (!as_column_major(args.M, args.K, args.a_stride_m, args.a_stride_k, lt_b)) return false;
  if (args.batch_offsets.ndim > 1 || args.batch > 0x7fffffff) return false;
  if (args.bias != nullptr && args.bias_stride != 1 && args.N > 1) return false;
  const std::int64_t a_batch_stride = args.batch_offsets.ndim == 1 ? args.batch_offsets.strides[0][1] : 0;
  const std::int64_t b_batch_stride = args.batch_offsets.ndim == 1 ? args.batch_offsets.strides[0][0] : 0;
  const std::int64_t c_batch_stride = args.M * args.N;
  const bool gelu = args.activation == GemmActivation::kGeluTanh;
  const bool aux = args.preactivation != nullptr;
  // cuBLASLt wants the auxiliary output's leading dimension and batch stride divisible by 8.
  if (aux && (args.N % 8 != 0)) return false;
  std::uint32_t epilogue = kEpilogueDefault;
  if (gelu || aux) {
    epilogue = args.bias != nullptr ? (aux ? kEpilogueGeluAuxBias : kEpilogueGeluBias) : (aux ? kEpilogueGeluAux : kEpilogueGelu);
  } else if (args.bias != nullptr) {
    epilogue = kEpilogueBias;
  }
  if (aux && !gelu) return false;  // cuBLASLt keeps a pre-activation only for GELU

  const cudaDataType_t type = cuda_type(dtype);
  const int compute = dtype == ScalarType::Float64 ? kComputeF64 : kComputeF32;
  const cudaDataType_t scale_type = dtype == ScalarType::Float64 ? CUDA_R_64F : CUDA_R_32F;
  Descriptors d(api);
  ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescCreate(&d.desc, compute, scale_type));
  ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescTransA, &lt_a.op, sizeof lt_a.op));
  ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescTransB, &lt_b.op, sizeof lt_b.op));
  ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescEpilogue, &epilogue, sizeof epilogue));
  if (args.bias != nullptr) {
    const void* bias = args.bias;
    const std::int64_t no_stride = 0;
    ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescBiasPointer, &bias, sizeof bias));
    ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescBiasBatchStride, &no_stride, sizeof no_stride));
  }
  if (aux) {
    void* pointer = args.preactivation;
    const std::int64_t ld = args.N;
    ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescAuxPointer, &pointer, sizeof pointer));
    ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescAuxLd, &ld, sizeof ld));
    ADCUDA_CUBLASLT_CHECK(api, api.MatmulDescSetAttribute(d.desc, kDescAuxBatchStride, &c_batch_stride,
                                                          sizeof c_batch_stride));
  }
  // op(A) is N x K, op(B) K x M: the stored matrices are those or their transposes.
  ADCUDA_CUBLASLT_CHECK(api, api.MatrixLayoutCreate(&d.a, type, lt_a.rows, lt_a.cols, lt_a.ld));
  ADCUDA_CUBLASLT_CHECK(api, api.MatrixLayoutCreate(&d.b, type, lt_b.rows, lt_b.cols, lt_b.ld));
  ADCUDA_CUBLASLT_CHECK(api, api.MatrixLayoutCreate(&d.c, type, static_cast<std::uint64_t>(args.N),
                                                    static_cast<std::uint64_t>(args.M), args.N));
  if (args.batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(args.batch);
    const std::pair<cublasLtMatrixLayout_t, std::int64_t> layouts[] = {
        {d.a, a_batch_stride}, {d.b, b_batch_stride}, {d.c, c_batch_stride}};
    for (const auto& [layout, stride] : layouts) {
      ADCUDA_CUBLASLT_CHECK(api, api.MatrixLayoutSetAttribute(layout, kLayoutBatchCount, &count, sizeof count));
      ADCUDA_CUBLASLT_CHECK(api, api.MatrixLayoutSetAttribute(layout, kLayoutBatchStride, &stride, sizeof stride));
    }
  }

  // The heuristic's choice depends on the pointers' alignment; it is asked once per distinct call.
  const int align_a = alignment_of(args.b), align_b = alignment_of(args.a), align_c = alignment_of(args.c);
  const int align_extra = std::min(args.bias != nullptr ? alignment_of(args.bias) : 16,
                                   aux ? alignment_of(args.preactivation) : 16);
  const AlgoKey key{device, static_cast<int>(dtype), lt_a.rows, lt_a.cols, lt_b.cols, lt_a.ld, lt_b.ld, lt_a.op,
                    lt_b.op, args.batch, a_batch_stride, b_batch_stride, epilogue, align_a, align_b, align_c,
                    align_extra};
  static std::mutex cache_mutex;
  static std::map<AlgoKey, std::pair<bool, cublasLtMatmulHeuristicResult_t>> cache;
  std::pair<bool, cublasLtMatmulHeuristicResult_t> choice{};
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto found = cache.find(key);
    if (found != cache.end()) {
      choice = found->second;
    } else {
      ADCUDA_CUBLASLT_CHECK(api, api.MatmulPreferenceCreate(&d.preference));
      const std::uint64_t workspace = kMaxWorkspaceBytes;
      ADCUDA_CUBLASLT_CHECK(api, api.MatmulPreferenceSetAttribute(d.preference, kPreferenceMaxWorkspace, &workspace,
                                                                  sizeof workspace));
      const std::uint32_t alignments[] = {static_cast<std::uint32_t>(align_a), static_cast<std::uint32_t>(align_b),
                                          static_cast<std::uint32_t>(std::min(align_c, align_extra)),
                                          static_cast<std::uint32_t>(std::min(align_c, align_extra))};
      const int attributes[] = {kPreferenceAlignmentA, kPreferenceAlignmentB, kPreferenceAlignmentC,
                                kPreferenceAlignmentD};
      for (int i = 0; i < 4; ++i) {
        ADCUDA_CUBLASLT_CHECK(api, api.MatmulPreferenceSetAttribute(d.preference, attributes[i], &alignments[i],
                                                                    sizeof alignments[i]));
      }
      int returned = 0;
      const cublasStatus_t status = api.MatmulAlgoGetHeuristic(handle, d.desc, d.a, d.b, d.c, d.c, d.preference, 1,
                                                               &choice.second, &returned);
      choice.first = status == kCublasSuccess && returned > 0;
      cache.emplace(key, choice);
    }
  }
  if (!choice.first) return false;  // no algorithm for this combination (e.g. an fp64 GELU epilogue)

  std::optional<DeviceArray> workspace;
  void* workspace_pointer = nullptr;
  if (choice.second.workspaceSize > 0) {
    workspace = DeviceArray::empty({static_cast<std::int64_t>(choice.second.workspaceSize)}, ScalarType::Bool, device);
    workspace_pointer = workspace->data_ptr();
  }
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = dtype == ScalarType::Float64;
  ADCUDA_CUBLASLT_CHECK(api, api.Matmul(handle, d.desc, f64 ? static_cast<const void*>(&one_d) : &one_f, args.b, d.a,
                                        args.a, d.b, f64 ? static_cast<const void*>(&zero_d) : &zero_f, args.c, d.c,
                                        args.c, d.c, &choice.second.algo, workspace_pointer,
                                        choice.second.workspaceSize, stream));
  return true;
}

#endif

}  // namespace adcuda
