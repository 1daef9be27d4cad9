// The few CUB device-wide algorithms (and Thrust fancy iterators) that kernels/sort.cu calls, for the
// emulated build: CUB's own kernels are written for nvcc (inline PTX, special registers), and CUB is
// NVIDIA's tested library rather than our code, so the emulator runs these on the host with the same
// signatures and results (stable sorts, inclusive segmented sums, order-preserving selection), queued
// in stream order like a kernel (so a CUDA graph capture records them too). sort.cu's own kernels
// around them are still emulated.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <type_traits>
#include <vector>

#include "emulator/cudart_state.h"

namespace thrust {

template <typename T>
class counting_iterator {
 public:
  explicit counting_iterator(T start) : start_(start) {}
  T operator[](std::int64_t i) const { return start_ + static_cast<T>(i); }

 private:
  T start_;
};

template <typename Base, typename F>
class transform_iterator {
 public:
  transform_iterator(Base base, F f) : base_(base), f_(f) {}
  auto operator[](std::int64_t i) const { return f_(base_[i]); }

 private:
  Base base_;
  F f_;
};

template <typename Base, typename F>
transform_iterator<Base, F> make_transform_iterator(Base base, F f) {
  return transform_iterator<Base, F>(base, f);
}

}  // namespace thrust

namespace cub {
namespace detail {
// CUB's protocol: called with temp == nullptr, report the scratch size; called again, do the work,
// which here is queued on the stream: it runs on the host after the stream's earlier work (the
// kernels writing the inputs), and the work queued after it sees the results.
template <typename Work>
cudaError_t in_stream_order(void* temp, std::size_t& bytes, cudaStream_t stream, Work work) {
  if (temp == nullptr) {
    bytes = 1;
    return cudaSuccess;
  }
  return adcuda::emu::enqueue(stream, std::function<void()>(std::move(work)));
}
}  // namespace detail

struct DeviceRadixSort {
  template <typename K, typename V, typename N>
  static cudaError_t SortPairs(void* temp, std::size_t& bytes, const K* keys_in, K* keys_out, const V* values_in,
                               V* values_out, N n, int begin_bit, int end_bit, cudaStream_t stream = nullptr) {
    static_assert(std::is_unsigned_v<K>, "sort.cu maps every key to an unsigned integer first");
    return detail::in_stream_order(temp, bytes, stream, [=] {
      const int width = end_bit - begin_bit;
      const K mask = width >= int(8 * sizeof(K)) ? ~K(0) : static_cast<K>((K(1) << width) - 1);
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return ((keys_in[a] >> begin_bit) & mask) < ((keys_in[b] >> begin_bit) & mask);
      });
      std::vector<K> keys(static_cast<std::size_t>(n));
      std::vector<V> values(static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < order.size(); ++i) {
        keys[i] = keys_in[order[i]];
        values[i] = values_in[order[i]];
      }
      std::copy(keys.begin(), keys.end(), keys_out);
      std::copy(values.begin(), values.end(), values_out);
    });
  }
};

struct DeviceScan {
  template <typename Keys, typename In, typename Out, typename Op, typename N, typename Equal>
  static cudaError_t InclusiveScanByKey(void* temp, std::size_t& bytes, Keys keys, In in, Out out, Op op, N n,
                                        Equal equal, cudaStream_t stream = nullptr) {
    return detail::in_stream_order(temp, bytes, stream, [=] {
      using V = std::remove_cv_t<std::remove_reference_t<decltype(in[0])>>;
      V running{};
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
        running = (i == 0 || !equal(keys[i - 1], keys[i])) ? V(in[i]) : V(op(running, in[i]));
        out[i] = running;
      }
    });
  }
};

struct DeviceSelect {
  template <typename In, typename Flags, typename Out, typename Count, typename N>
  static cudaError_t Flagged(void* temp, std::size_t& bytes, In in, Flags flags, Out out, Count* selected, N n,
                             cudaStream_t stream = nullptr) {
    return detail::in_stream_order(temp, bytes, stream, [=] {
      Count count = 0;
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
        if (flags[i]) out[count++] = in[i];
      }
      *selected = count;
    });
  }
};

struct DeviceReduce {
  template <typename KeysIn, typename UniqueOut, typename ValuesIn, typename AggregatesOut, typename RunsOut,
            typename Op, typename N>
  static cudaError_t ReduceByKey(void* temp, std::size_t& bytes, KeysIn keys, UniqueOut unique, ValuesIn values,
                                 AggregatesOut aggregates, RunsOut runs, Op op, N n, cudaStream_t stream = nullptr) {
    return detail::in_stream_order(temp, bytes, stream, [=] {
      std::int64_t count = 0;
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
        if (i == 0 || !(keys[i] == keys[i - 1])) {
          unique[count] = keys[i];
          aggregates[count] = values[i];
          ++count;
        } else {
          aggregates[count - 1] = op(aggregates[count - 1], values[i]);
        }
      }
      *runs = count;
    });
  }
};

}  // namespace cub
