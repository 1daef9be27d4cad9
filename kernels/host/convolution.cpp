// The CPU backend's convolution gathers (adcuda/backends/cpu/convolution.py): im2col, which copies
// every window of an NCHW input into the column matrix a GEMM reads, and col2im, which adds a column
// matrix back into the input's shape. NumPy does both as strided copies and adds whose innermost loop
// is one output row (4-16 elements at a DCGAN's or a ResNet's strided layers, a loop step each) and
// needs a padded copy of the input first; here each is one pass with the padding read as zeros. The
// NumPy path stays the reference (tests/test_cpu_fast_paths.py compares the two). Built in every
// install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

struct Window {
  Index c, h, w, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw;
};

// The output columns [lo, hi) whose input column x * s + offset lies inside [0, width).
void inside(Index offset, Index stride, Index width, Index outputs, Index& lo, Index& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  hi = offset >= width ? 0 : (width - 1 - offset) / stride + 1;
  lo = std::min(lo, outputs);
  hi = std::max(std::min(hi, outputs), lo);
}

// cols (C*kh*kw, m, Ho*Wo) <- the windows of samples n0 .. n0 + m of x (N, C, H, W), both contiguous.
// SW is the horizontal stride when it is known at compile time (1 or 2: the inner copy vectorises),
// 0 otherwise.
template <typename T, int SW>
void im2col(const T* x, T* cols, const Window& g, Index n0, Index m) {
  const Index sw = SW ? SW : g.sw;
  const Index plane = g.h * g.w, per_row = m * g.ho * g.wo;
  // each tap's output columns inside the input, [lo, hi): the rest read padding
  std::vector<Index> lo(g.kw), hi(g.kw);
  for (Index j = 0; j < g.kw; ++j) inside(j * g.dw - g.pw, sw, g.w, g.wo, lo[j], hi[j]);
  // the kw taps of one kernel row read the same input row: visited together, for one loop setup
  // per input row rather than per output row (rows of 4-8 outputs at strided layers)
  for (Index c = 0; c < g.c; ++c) {
    for (Index i = 0; i < g.kh; ++i) {
      T* tap0 = cols + (c * g.kh + i) * g.kw * per_row;
      for (Index n = 0; n < m; ++n) {
        const T* src = x + ((n0 + n) * g.c + c) * plane;
        for (Index y = 0; y < g.ho; ++y) {
          T* row_out = tap0 + (n * g.ho + y) * g.wo;
          const Index row = y * g.sh + i * g.dh - g.ph;
          if (row < 0 || row >= g.h) {
            for (Index j = 0; j < g.kw; ++j) std::fill(row_out + j * per_row, row_out + j * per_row + g.wo, T(0));
            continue;
          }
          const T* in_row = src + row * g.w - g.pw;
          for (Index j = 0; j < g.kw; ++j) {
            T* out = row_out + j * per_row;
            const T* in = in_row + j * g.dw;
            const Index a = lo[j], b = hi[j];
            for (Index q = 0; q < a; ++q) out[q] = T(0);
            if constexpr (SW == 1)
              std::copy(in + a, in + b, out + a);
            else
              for (Index q = a; q < b; ++q) out[q] = in[q * sw];
            for (Index q = b; q < g.wo; ++q) out[q] = T(0);
          }
        }
      }
    }
  }
}

// dx (N, C, H, W), contiguous, += the column matrix cols (C*kh*kw, N, Ho*Wo) of any strides: each
// window's values added back where im2col read them (padding dropped), a kernel row's taps together.
template <typename T>
void col2im(const T* cols, const Index cs[3], T* dx, const Window& g, Index n_total) {
  const Index plane = g.h * g.w;
  std::vector<Index> lo(g.kw), hi(g.kw);
  for (Index j = 0; j < g.kw; ++j) inside(j * g.dw - g.pw, g.sw, g.w, g.wo, lo[j], hi[j]);
  const bool unit = cs[2] == 1 && g.sw == 1;
  for (Index n = 0; n < n_total; ++n) {
    for (Index c = 0; c < g.c; ++c) {
      T* dst = dx + (n * g.c + c) * plane;
      for (Index i = 0; i < g.kh; ++i) {
        const T* tap0 = cols + (c * g.kh + i) * g.kw * cs[0] + n * cs[1];
        for (Index y = 0; y < g.ho; ++y) {
          const Index row = y * g.sh + i * g.dh - g.ph;
          if (row < 0 || row >= g.h) continue;
          T* out_row = dst + row * g.w - g.pw;
          const T* in_row = tap0 + y * g.wo * cs[2];
          for (Index j = 0; j < g.kw; ++j) {
            T* out = out_row + j * g.dw;
            const T* src = in_row + j * cs[0];
            if (unit) {
              for (Index q = lo[j]; q < hi[j]; ++q) out[q] += src[q];
            } else {
              for (Index q = lo[j]; q < hi[j]; ++q) out[q * g.sw] += src[q * cs[2]];
            }
          }
        }
      }
    }
  }
}

// Each output position's input for every kernel tap, as offsets into one input plane (-1: the
// padding): (kh * kw, Ho * Wo). With output rows of a few values (a DCGAN's or a ResNet's strided
// layers, 1-8 wide) a gather over this table runs one flat loop per tap and plane, where the row
// loops above pay a loop setup per few values: 2-4x faster there.
std::vector<std::int32_t> tap_offsets(const Window& g) {
  const Index length = g.ho * g.wo;
  std::vector<std::int32_t> table(static_cast<std::size_t>(g.kh * g.kw * length));
  for (Index i = 0; i < g.kh; ++i)
    for (Index j = 0; j < g.kw; ++j) {
      std::int32_t* off = table.data() + (i * g.kw + j) * length;
      for (Index y = 0; y < g.ho; ++y) {
        const Index row = y * g.sh + i * g.dh - g.ph;
        for (Index q = 0; q < g.wo; ++q) {
          const Index col = q * g.sw + j * g.dw - g.pw;
          const bool in = row >= 0 && row < g.h && col >= 0 && col < g.w;
          off[y * g.wo + q] = in ? static_cast<std::int32_t>(row * g.w + col) : -1;
        }
      }
    }
  return table;
}

// im2col (same layout) by the tap table: planes of fewer than 2^31 values (checked by the caller).
template <typename T>
void im2col_by_table(const T* x, T* cols, const Window& g, Index n0, Index m) {
  const std::vector<std::int32_t> table = tap_offsets(g);
  const Index plane = g.h * g.w, length = g.ho * g.wo, taps = g.kh * g.kw;
  for (Index c = 0; c < g.c; ++c)
    for (Index t = 0; t < taps; ++t) {
      const std::int32_t* off = table.data() + t * length;
      T* dst = cols + (c * taps + t) * m * length;
      for (Index n = 0; n < m; ++n) {
        const T* src = x + ((n0 + n) * g.c + c) * plane;
        T* d = dst + n * length;
        // the padding reads src[0] and drops it, so that the loop has no branch
        for (Index k = 0; k < length; ++k) d[k] = off[k] >= 0 ? src[off[k]] : T(0);
      }
    }
}

// col2im (same layouts) by the tap table; a tap's positions are distinct, so its adds never collide.
template <typename T>
void col2im_by_table(const T* cols, const Index cs[3], T* dx, const Window& g, Index n_total) {
  const std::vector<std::int32_t> table = tap_offsets(g);
  const Index plane = g.h * g.w, length = g.ho * g.wo, taps = g.kh * g.kw;
  for (Index n = 0; n < n_total; ++n)
    for (Index c = 0; c < g.c; ++c) {
      T* dst = dx + (n * g.c + c) * plane;
      for (Index t = 0; t < taps; ++t) {
        const std::int32_t* off = table.data() + t * length;
        const T* src = cols + (c * taps + t) * cs[0] + n * cs[1];
        for (Index k = 0; k < length; ++k)
          if (off[k] >= 0) dst[off[k]] += src[k * cs[2]];
      }
    }
}

// Channels-last columns, for strided layers of many channels (adcuda/backends/cpu/convolution.py,
// _channels_last): cols (m, Ho*Wo, kh*kw*C) <- the windows of samples n0 .. n0 + m of x (N, C, H, W),
// each tap a run of C channels copied from one sample made channels-last (H, W, C) first. The gathers
// above move a stride-2 layer's columns one value at a time (rows of 4-8 outputs, each read at a
// stride); here every copy is a contiguous run of C values: 2-3x faster at a DCGAN's 4x4 layers.
template <typename T>
void channels_last(const T* src, T* hwc, Index c, Index plane) {
  // written in order, read from C sequential streams (writing C streams instead spills the plane
  // out of L1 between the passes)
  for (Index p = 0; p < plane; ++p)
    for (Index k = 0; k < c; ++k) hwc[p * c + k] = src[k * plane + p];
}

template <typename T>
void im2col_channels_last(const T* x, T* cols, const Window& g, Index n0, Index m) {
  const Index plane = g.h * g.w, run = g.kh * g.kw * g.c;
  std::vector<T> hwc(static_cast<std::size_t>(plane * g.c));
  for (Index n = 0; n < m; ++n) {
    channels_last(x + (n0 + n) * g.c * plane, hwc.data(), g.c, plane);
    T* dst = cols + n * g.ho * g.wo * run;
    for (Index y = 0; y < g.ho; ++y)
      for (Index q = 0; q < g.wo; ++q, dst += run)
        for (Index i = 0; i < g.kh; ++i) {
          const Index row = y * g.sh + i * g.dh - g.ph;
          for (Index j = 0; j < g.kw; ++j) {
            const Index col = q * g.sw + j * g.dw - g.pw;
            T* out = dst + (i * g.kw + j) * g.c;
            if (row < 0 || row >= g.h || col < 0 || col >= g.w)
              std::fill(out, out + g.c, T(0));
            else
              std::copy_n(hwc.data() + (row * g.w + col) * g.c, g.c, out);
          }
        }
  }
}

// dx[n0 .. n0 + m] (N, C, H, W) <- the channels-last columns cols (m, Ho*Wo, kh*kw*C) added back where
// im2col_channels_last read them (padding dropped), one sample at a time in a channels-last plane.
template <typename T>
void col2im_channels_last(const T* cols, T* dx, const Window& g, Index n0, Index m) {
  const Index plane = g.h * g.w, run = g.kh * g.kw * g.c;
  std::vector<T> hwc(static_cast<std::size_t>(plane * g.c));
  for (Index n = 0; n < m; ++n) {
    std::fill(hwc.begin(), hwc.end(), T(0));
    const T* src = cols + n * g.ho * g.wo * run;
    for (Index y = 0; y < g.ho; ++y)
      for (Index q = 0; q < g.wo; ++q, src += run)
        for (Index i = 0; i < g.kh; ++i) {
          const Index row = y * g.sh + i * g.dh - g.ph;
          if (row < 0 || row >= g.h) continue;
          for (Index j = 0; j < g.kw; ++j) {
            const Index col = q * g.sw + j * g.dw - g.pw;
            if (col < 0 || col >= g.w) continue;
            T* out = hwc.data() + (row * g.w + col) * g.c;
            const T* in = src + (i * g.kw + j) * g.c;
            for (Index k = 0; k < g.c; ++k) out[k] += in[k];
          }
        }
    T* dst = dx + (n0 + n) * g.c * plane;
    for (Index k = 0; k < g.c; ++k)
      for (Index p = 0; p < plane; ++p) dst[k * plane + p] = hwc[p * g.c + k];
  }
}

Window window(Index c, Index h, Index w, py::tuple kernel, py::tuple out, py::tuple stride, py::tuple padding,
              py::tuple dilation) {
  auto at = [](const py::tuple& t, int k) { return t[k].cast<Index>(); };
  Window g{c,
           h,
           w,
           at(kernel, 0),
           at(kernel, 1),
           at(out, 0),
           at(out, 1),
           at(stride, 0),
           at(stride, 1),
           at(padding, 0),
           at(padding, 1),
           at(dilation, 0),
           at(dilation, 1)};
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.ph < 0 || g.pw < 0 || g.ho < 0 ||
      g.wo < 0)
    throw std::invalid_argument("cpu convolution: kernel, stride and dilation must be positive, padding >= 0");
  return g;
}

template <typename T>
void im2col_checked(const py::array& x_any, py::array& cols_any, const Window& g, Index n0, bool by_table) {
  auto x = py::array_t<T, py::array::c_style>::ensure(x_any);
  if (!x || !(cols_any.flags() & py::array::c_style) || !cols_any.writeable())
    throw std::invalid_argument("cpu_im2col: x and cols must be C-contiguous, cols writeable, of one dtype");
  auto cols = py::reinterpret_borrow<py::array_t<T>>(cols_any);
  const Index m = cols.ndim() == 3 ? cols.shape(1) : -1;
  if (x.ndim() != 4 || x.shape(1) != g.c || cols.ndim() != 3 || cols.shape(0) != g.c * g.kh * g.kw ||
      cols.shape(2) != g.ho * g.wo || n0 < 0 || n0 + m > x.shape(0))
    throw std::invalid_argument("cpu_im2col: the shapes of x and cols do not fit the window");
  const T* src = x.data();
  T* dst = cols.mutable_data();
  py::gil_scoped_release release;
  if (by_table)
    im2col_by_table<T>(src, dst, g, n0, m);
  else if (g.sw == 1)
    im2col<T, 1>(src, dst, g, n0, m);
  else if (g.sw == 2)
    im2col<T, 2>(src, dst, g, n0, m);
  else
    im2col<T, 0>(src, dst, g, n0, m);
}

template <typename T>
void col2im_checked(const py::array& cols_any, py::array& dx_any, const Window& g, bool by_table) {
  if (!(dx_any.flags() & py::array::c_style) || !dx_any.writeable())
    throw std::invalid_argument("cpu_col2im: dx must be C-contiguous and writeable");
  auto cols = py::reinterpret_borrow<py::array_t<T>>(cols_any);
  auto dx = py::reinterpret_borrow<py::array_t<T>>(dx_any);
  if (dx.ndim() != 4 || dx.shape(1) != g.c || cols.ndim() != 3 || cols.shape(0) != g.c * g.kh * g.kw ||
      cols.shape(1) != dx.shape(0) || cols.shape(2) != g.ho * g.wo)
    throw std::invalid_argument("cpu_col2im: the shapes of cols and dx do not fit the window");
  Index cs[3];
  for (int k = 0; k < 3; ++k) {
    if (cols.strides(k) % static_cast<Index>(sizeof(T)) != 0)
      throw std::invalid_argument("cpu_col2im: cols's strides must be whole elements");
    cs[k] = cols.strides(k) / static_cast<Index>(sizeof(T));
  }
  const T* src = cols.data();
  T* dst = dx.mutable_data();
  const Index n = dx.shape(0);
  py::gil_scoped_release release;
  if (by_table)
    col2im_by_table(src, cs, dst, g, n);
  else
    col2im(src, cs, dst, g, n);
}

// The channels-last gathers (both ways): x (N, C, H, W) and cols (m, Ho*Wo, kh*kw*C), both contiguous;
// to_cols: im2col (x read, cols written), else col2im (cols read, x's samples n0 .. n0 + m written).
template <typename T>
void channels_last_checked(py::array& x_any, py::array& cols_any, const Window& g, Index n0, bool to_cols) {
  py::array& written = to_cols ? cols_any : x_any;
  if (!(x_any.flags() & py::array::c_style) || !(cols_any.flags() & py::array::c_style) || !written.writeable())
    throw std::invalid_argument("cpu_channels_last_columns: x and cols must be C-contiguous, the output writeable");
  auto x = py::reinterpret_borrow<py::array_t<T>>(x_any);
  auto cols = py::reinterpret_borrow<py::array_t<T>>(cols_any);
  const Index m = cols.ndim() == 3 ? cols.shape(0) : -1;
  if (x.ndim() != 4 || x.shape(1) != g.c || cols.ndim() != 3 || cols.shape(1) != g.ho * g.wo ||
      cols.shape(2) != g.c * g.kh * g.kw || n0 < 0 || n0 + m > x.shape(0))
    throw std::invalid_argument("cpu_channels_last_columns: the shapes of x and cols do not fit the window");
  T* xs = x.mutable_data();
  T* cs = cols.mutable_data();
  py::gil_scoped_release release;
  if (to_cols)
    im2col_channels_last<T>(xs, cs, g, n0, m);
  else
    col2im_channels_last<T>(cs, xs, g, n0, m);
}

// The tap table's offsets are 32-bit: planes below 2^31 values (larger ones take the row loops).
bool fits_table(const Window& g) { return g.h * g.w < (Index(1) << 31); }

// conv2d by kernel rows' output (adcuda/backends/cpu/convolution.py, _conv_by_kernel_rows): out (m, G * Og, L)
// = the sum over kernel rows i of rows (G, kh, Og, m, Hr * Wo) from column i * shift on, one pass, where
// NumPy's adds pass over the output kh - 1 times through a transposed view.
template <typename T>
void add_row_shifts(const T* rows, T* out, Index groups, Index kh, Index og, Index m, Index span, Index length,
                    Index shift) {
  for (Index n = 0; n < m; ++n)
    for (Index g = 0; g < groups; ++g)
      for (Index o = 0; o < og; ++o) {
        T* dst = out + (n * groups * og + g * og + o) * length;
        const T* first = rows + (((g * kh) * og + o) * m + n) * span;
        const Index step = og * m * span;  // from kernel row i to i + 1
        for (Index k = 0; k < length; ++k) dst[k] = first[k];
        for (Index i = 1; i < kh; ++i) {
          const T* src = first + i * step + i * shift;
          for (Index k = 0; k < length; ++k) dst[k] += src[k];
        }
      }
}

template <typename T>
void add_row_shifts_checked(const py::array& rows_any, py::array& out_any, Index shift) {
  auto rows = py::array_t<T, py::array::c_style>::ensure(rows_any);
  if (!rows || !(out_any.flags() & py::array::c_style) || !out_any.writeable())
    throw std::invalid_argument("cpu_add_row_shifts: rows and out must be C-contiguous, out writeable");
  auto out = py::reinterpret_borrow<py::array_t<T>>(out_any);
  if (rows.ndim() != 5 || out.ndim() != 3)
    throw std::invalid_argument("cpu_add_row_shifts: rows must be (G, kh, Og, m, span) and out (m, G * Og, length)");
  const Index groups = rows.shape(0), kh = rows.shape(1), og = rows.shape(2), m = rows.shape(3), span = rows.shape(4);
  const Index length = out.shape(2);
  if (out.shape(0) != m || out.shape(1) != groups * og || shift < 0 || (kh - 1) * shift + length > span)
    throw std::invalid_argument("cpu_add_row_shifts: the shapes of rows and out do not fit the shift");
  const T* src = rows.data();
  T* dst = out.mutable_data();
  py::gil_scoped_release release;
  add_row_shifts(src, dst, groups, kh, og, m, span, length, shift);
}

bool same_float_dtype(const py::array& a, const py::array& b, bool& is_double) {
  const auto f32 = py::dtype::of<float>(), f64 = py::dtype::of<double>();
  if (a.dtype().equal(f32)) {
    is_double = false;
    return b.dtype().equal(f32);
  }
  if (a.dtype().equal(f64)) {
    is_double = true;
    return b.dtype().equal(f64);
  }
  return false;
}

}  // namespace

void bind_convolution(py::module_& m) {
  m.def(
      "cpu_im2col",
      [](const py::array& x, py::array& cols, py::tuple kernel, py::tuple out, py::tuple stride, py::tuple padding,
         py::tuple dilation, Index n0, bool by_table) {
        bool is_double = false;
        if (x.ndim() != 4 || !same_float_dtype(x, cols, is_double))
          throw std::invalid_argument("cpu_im2col: x (N, C, H, W) and cols must be both float32 or both float64");
        const Window g = window(x.shape(1), x.shape(2), x.shape(3), kernel, out, stride, padding, dilation);
        by_table = by_table && fits_table(g);
        if (is_double)
          im2col_checked<double>(x, cols, g, n0, by_table);
        else
          im2col_checked<float>(x, cols, g, n0, by_table);
      },
      py::arg("x"), py::arg("cols"), py::arg("kernel"), py::arg("out"), py::arg("stride"), py::arg("padding"),
      py::arg("dilation"), py::arg("n0"), py::arg("by_table") = false,
      "cols (C*kh*kw, m, Ho*Wo) <- the zero-padded windows of samples n0 .. n0+m of x (N, C, H, W); "
      "by_table: gather through a table of offsets (for short output rows).");
  m.def(
      "cpu_col2im",
      [](const py::array& cols, py::array& dx, py::tuple kernel, py::tuple out, py::tuple stride, py::tuple padding,
         py::tuple dilation, bool by_table) {
        bool is_double = false;
        if (dx.ndim() != 4 || !same_float_dtype(dx, cols, is_double))
          throw std::invalid_argument("cpu_col2im: cols and dx (N, C, H, W) must be both float32 or both float64");
        const Window g = window(dx.shape(1), dx.shape(2), dx.shape(3), kernel, out, stride, padding, dilation);
        by_table = by_table && fits_table(g);
        if (is_double)
          col2im_checked<double>(cols, dx, g, by_table);
        else
          col2im_checked<float>(cols, dx, g, by_table);
      },
      py::arg("cols"), py::arg("dx"), py::arg("kernel"), py::arg("out"), py::arg("stride"), py::arg("padding"),
      py::arg("dilation"), py::arg("by_table") = false,
      "dx (N, C, H, W) += the columns cols (C*kh*kw, N, Ho*Wo), any strides, added back; by_table: through a "
      "table of offsets (for short output rows).");
  m.def(
      "cpu_channels_last_columns",
      [](py::array& x, py::array& cols, py::tuple kernel, py::tuple out, py::tuple stride, py::tuple padding,
         py::tuple dilation, Index n0, bool to_cols) {
        bool is_double = false;
        if (x.ndim() != 4 || !same_float_dtype(x, cols, is_double))
          throw std::invalid_argument(
              "cpu_channels_last_columns: x (N, C, H, W) and cols must be both float32 or both float64");
        const Window g = window(x.shape(1), x.shape(2), x.shape(3), kernel, out, stride, padding, dilation);
        if (is_double)
          channels_last_checked<double>(x, cols, g, n0, to_cols);
        else
          channels_last_checked<float>(x, cols, g, n0, to_cols);
      },
      py::arg("x"), py::arg("cols"), py::arg("kernel"), py::arg("out"), py::arg("stride"), py::arg("padding"),
      py::arg("dilation"), py::arg("n0"), py::arg("to_cols"),
      "to_cols: cols (m, Ho*Wo, kh*kw*C) <- the zero-padded windows of samples n0 .. n0+m of x (N, C, H, W), "
      "channels last; else x[n0 : n0+m] <- such columns added back (col2im).");
  m.def(
      "cpu_add_row_shifts",
      [](const py::array& rows, py::array& out, Index shift) {
        bool is_double = false;
        if (!same_float_dtype(out, rows, is_double))
          throw std::invalid_argument("cpu_add_row_shifts: rows and out must be both float32 or both float64");
        if (is_double)
          add_row_shifts_checked<double>(rows, out, shift);
        else
          add_row_shifts_checked<float>(rows, out, shift);
      },
      py::arg("rows"), py::arg("out"), py::arg("shift"),
      "out (m, G*Og, L) <- the sum over kernel rows i of rows (G, kh, Og, m, span)[:, i, :, :, i*shift : i*shift+L].");
}

}  // namespace adcuda::host
