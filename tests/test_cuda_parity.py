"""The array-machinery kernels (kernels/elementwise_unary.cu, elementwise_binary.cu, reduce.cu, index.cu,
layout.cu, sort.cu, random.cu) against the CPU backend, the oracle.

Two parts:
- on any machine: the NumPy advanced-indexing planner the CUDA indexing builds on
  (adcuda/backends/_advanced_index.py) against NumPy itself, and, where nvcc is installed, the
  kernels' own __host__ __device__ code (the math functors, Philox, the fast divider, the uniform
  conversions) compiled for the host and checked against the CPU backend and known answers;
- with a usable GPU (marked ``cuda``, skipped otherwise): every primitive against the CPU backend in
  fp32, fp16 and bf16 (fp64 and the integer and bool dtypes where defined) on odd shapes (1, 7, 1023,
  65537), 0-d and empty arrays, transposed, strided and broadcast operands; every op's forward and
  backward through the Tensor API against the CPU; a selection of gradient checks in float64 on the
  GPU; reproducibility and statistics of the Philox draws.

bfloat16 has no NumPy type: its CPU reference runs in float32 on the bf16-rounded inputs.
"""

import math
import os
import re
import shutil
import subprocess
import textwrap

import numpy as np
import pytest
from cuda_arrays import assert_matches, held, host_dtype, to_device, to_host

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import _advanced_index, cpu
from adcuda.backends.cpu import elementwise as cpu_elementwise
from adcuda.errors import IndexOutOfRangeError, InvalidArgumentError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA = adcuda.cuda.is_available()


def gpu(test):
    """Marks a test as needing a usable CUDA device (it is skipped without one)."""
    return pytest.mark.cuda(pytest.mark.skipif(not CUDA, reason="needs a usable CUDA device")(test))


# =============================================================================================
# the advanced-indexing planner, against NumPy (any machine)
def _entry(k):
    k = np.asarray(k, dtype=np.int64)
    return (k, k.shape, tuple(s // k.itemsize for s in k.strides))


def _items(key):
    """A NumPy key as planner items (what backends/cuda/index.py builds from device arrays)."""
    items = []
    for k in key if isinstance(key, tuple) else (key,):
        if k is None:
            items.append(("none",))
        elif k is Ellipsis:
            items.append(("ellipsis",))
        elif isinstance(k, slice):
            items.append(("slice", k))
        elif isinstance(k, (bool, np.bool_)) or (isinstance(k, np.ndarray) and k.dtype == bool and k.ndim == 0):
            items.append(("bool", _entry([0] if k else np.zeros(0, np.int64))))
        elif isinstance(k, int):
            items.append(("int", k))
        elif k.dtype == bool:
            coords = np.ascontiguousarray(np.stack(np.nonzero(k), axis=1).reshape(-1, k.ndim))
            columns = [(coords[:, j], (coords.shape[0],), (k.ndim,)) for j in range(k.ndim)]
            items.append(("arrays", columns, k.shape))
        else:
            items.append(("arrays", [_entry(k)], None))
    return items


def _run_plan(flat, plan):
    """Execute a plan with NumPy, as the gather kernel does: base offsets plus index-array offsets."""
    for ia in plan.arrays:
        h = ia.handle
        if h.size and (h.min() < -ia.size or h.max() >= ia.size):
            raise IndexOutOfRangeError("index out of range")
    if 0 in plan.shape:
        return np.zeros(plan.shape, flat.dtype)
    grids = np.indices(plan.shape, dtype=np.int64)
    offsets = np.full(plan.shape, plan.view_offset, dtype=np.int64)
    for d, stride in enumerate(plan.strides):
        offsets += grids[d] * stride
    for ia in plan.arrays:
        view = np.lib.stride_tricks.as_strided(ia.handle, plan.shape, [s * 8 for s in ia.result_strides])
        offsets += np.where(view < 0, view + ia.size, view) * ia.stride
    return flat[offsets]


def _random_key(rng, shape):
    """A random NumPy key for an array of ``shape``: slices (some reversed), ints, integer arrays, 1-d and 2-d
    masks, None, an Ellipsis, now and then a bool."""
    key, d, ndim, ellipsis = [], 0, len(shape), False
    while d < ndim and rng.random() > 0.1:
        r, n = int(rng.integers(0, 10)), shape[d]
        if r == 0 and not ellipsis:
            key.append(Ellipsis)
            ellipsis = True
            d = max(d, ndim - int(rng.integers(0, 3)))  # it stands for all but the last few dims
            continue
        if r == 1:
            key.append(None)
            continue
        if r == 8 and d + 1 < ndim:
            key.append(rng.random(shape[d : d + 2]) > 0.4)
            d += 2
            continue
        key.append(
            [
                slice(None),
                slice(int(rng.integers(0, n + 1)), None, int(rng.integers(1, 3))),
                int(rng.integers(-n, n)),
                rng.integers(-n, n, size=int(rng.integers(0, 3))),
                rng.integers(0, n, size=(2, 1)),
                rng.random(n) > 0.5,
                slice(None, None, -1),
                slice(None),
                slice(None),
            ][r - 2]
        )
        d += 1
    if rng.random() < 0.05:
        key.insert(int(rng.integers(0, len(key) + 1)), bool(rng.integers(0, 2)))
    return tuple(key)


def test_advanced_index_plan_matches_numpy_on_random_keys():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(1500):
        shape = [(5,), (5, 3), (5, 3, 4), (2, 3, 4, 5)][int(rng.integers(0, 4))]
        a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        v = a.transpose(rng.permutation(len(shape)))
        if rng.random() < 0.3:
            v = v[(slice(None, None, 2),) + (slice(None),) * (v.ndim - 1)]
        offset = (v.__array_interface__["data"][0] - a.__array_interface__["data"][0]) // 8
        key = _random_key(rng, v.shape)
        try:
            expected = v[key]
        except (IndexError, ValueError):
            with pytest.raises((IndexOutOfRangeError, IndexError, ValueError)):
                strides = tuple(s // 8 for s in v.strides)
                _run_plan(a.ravel(), _advanced_index.plan(v.shape, strides, offset, _items(key)))
            continue
        plan = _advanced_index.plan(v.shape, tuple(s // 8 for s in v.strides), offset, _items(key))
        got = _run_plan(a.ravel(), plan)
        assert got.shape == expected.shape, (key, v.shape)
        np.testing.assert_array_equal(got, expected, err_msg=repr(key))
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize(
    "shape,key",
    [
        ((5, 3, 4), (slice(None), [0, 1], Ellipsis, [0, 1])),  # an empty Ellipsis still separates advanced indices
        ((5, 3, 4), (slice(None), [0, 1], None, [1, 2])),  # so does None
        ((5, 3, 4), (slice(None), 0, [1, 2])),  # ints count as advanced next to arrays: adjacent
        ((2, 3, 4, 3), (slice(None), [1, 2], slice(None), 0)),  # ... and not adjacent here: the result dims go first
        ((5, 3, 4), (None, [0, 1], 0)),
        ((2, 3, 4), (True, [0, 1])),
        ((2, 3, 4), (False,)),
        ((2, 3, 4), (np.array(True),)),
        ((2, 3, 5), (np.array([[True, False, True], [False, False, True]]),)),
        ((2, 3, 4), (Ellipsis, np.array([True, False, True, True]))),
        ((2, 3, 4), ([[0], [1]], [0, 1, 2])),
        ((2, 3, 4), (-1, Ellipsis, -1)),
    ],
    ids=str,
)
def test_advanced_index_plan_numpy_placement_rules(shape, key):
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    key = tuple(np.array(k) if isinstance(k, list) else k for k in key)
    plan = _advanced_index.plan(a.shape, tuple(s // 8 for s in a.strides), 0, _items(key))
    np.testing.assert_array_equal(_run_plan(a.ravel(), plan), a[key])


def test_advanced_index_plan_errors_match_numpy():
    shape, strides = (3, 4), (4, 1)
    with pytest.raises(IndexOutOfRangeError, match="too many indices"):
        _advanced_index.plan(shape, strides, 0, _items((0, 0, 0)))
    with pytest.raises(IndexOutOfRangeError, match="single ellipsis"):
        _advanced_index.plan(shape, strides, 0, _items((Ellipsis, Ellipsis)))
    with pytest.raises(IndexOutOfRangeError, match="out of bounds for axis 1 with size 4"):
        _advanced_index.plan(shape, strides, 0, _items((0, 4)))
    with pytest.raises(IndexOutOfRangeError, match="could not be broadcast"):
        _advanced_index.plan(shape, strides, 0, _items((np.array([0, 1]), np.array([0, 1, 2]))))
    with pytest.raises(IndexOutOfRangeError, match="boolean index did not match"):
        _advanced_index.plan(shape, strides, 0, _items((np.array([True, False]),)))


def test_value_strides_follow_numpy_assignment_broadcasting():
    assert _advanced_index.value_strides((1, 1, 4), (4, 4, 1), (3, 4)) == (0, 1)
    assert _advanced_index.value_strides((3, 1), (1, 1), (2, 3, 4)) == (0, 1, 0)
    assert _advanced_index.value_strides((), (), (2, 3)) == (0, 0)
    with pytest.raises(ValueError, match="could not be broadcast"):
        _advanced_index.value_strides((2, 4), (4, 1), (3, 4))
    with pytest.raises(ValueError):
        _advanced_index.value_strides((2, 3, 4), (12, 4, 1), (3, 4))


# =============================================================================================
# the kernels' __host__ __device__ code, compiled for the host with nvcc (any machine with nvcc)
_HARNESS = textwrap.dedent(r"""
    #include <cstdio>
    #include <cstdlib>
    #include <cstring>
    #include <string>
    #include <vector>
    #include "elementwise_loops.cuh"
    #include "functors.cuh"
    #include "philox.cuh"
    using namespace adcuda;

    // the one runtime function the headers use that lives in a .cu file (error messages)
    std::string adcuda::format_dims(const Dims& dims) {
      std::string text = "(";
      for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
      return text + ")";
    }

    template <typename C> std::vector<C> read(const char* path) {
      FILE* f = std::fopen(path, "rb"); std::vector<C> v;
      C x; while (std::fread(&x, sizeof(C), 1, f) == 1) v.push_back(x);
      std::fclose(f); return v;
    }
    template <typename C> void write(const char* path, const std::vector<C>& v) {
      FILE* f = std::fopen(path, "wb"); std::fwrite(v.data(), sizeof(C), v.size(), f); std::fclose(f);
    }
    template <typename C, typename F> std::vector<C> map1(const std::vector<C>& x, F f) {
      std::vector<C> r; for (C v : x) r.push_back(static_cast<C>(f(v))); return r;
    }
    template <typename C> bool unary(const std::string& op, const std::vector<C>& x, std::vector<C>& r) {
      using namespace adcuda::math;
    // every unary row of the one elementwise table (kernels/elementwise_ops.def) but the bitwise and
    // logical ones, which take no floats: a row added there is checked here without another list
    enum class Kind { FloatOnly, Numeric, Rounding, Bitwise, Logical };
    #define ADCUDA_UNARY(name, kind, F, half_via_float32, bool_is_identity)          \
      if constexpr (Kind::kind != Kind::Bitwise && Kind::kind != Kind::Logical) {   \
        if (op == #name) { r = map1(x, F{}); return true; }                          \
      }
    #include "elementwise_ops.def"
    #undef ADCUDA_UNARY
      return false;
    }
    template <typename C> bool binary(const std::string& op, const std::vector<C>& a, const std::vector<C>& b,
                                      std::vector<C>& r) {
      using namespace adcuda::math;
    #define B(name, F) \
      if (op == name) { for (size_t i = 0; i < a.size(); ++i) r.push_back(F{}(a[i], b[i])); return true; }
      B("add", Add) B("sub", Sub) B("mul", Mul) B("pow", Pow) B("maximum", Maximum) B("minimum", Minimum)
      B("floor_divide", FloorDivide) B("remainder", Remainder)
      if constexpr (std::is_floating_point_v<C>) {  // every FLOAT_BINARY row of the one table
    #define ADCUDA_FLOAT_BINARY(name, F) B(#name, F)
    #include "elementwise_ops.def"
    #undef ADCUDA_FLOAT_BINARY
      }
    #undef B
      return false;
    }
    template <typename C> bool backward(const std::string& op, const std::vector<C>& x, const std::vector<C>& y,
                                        const std::vector<C>& g, std::vector<C>& r) {
      using namespace adcuda::math;
    #define G(name, F) \
      if (op == name) { for (size_t i = 0; i < x.size(); ++i) r.push_back(F{}(x[i], y[i], g[i])); return true; }
      G("relu", ReluBackward) G("gelu", GeluBackward) G("gelu_tanh", GeluTanhBackward) G("silu", SiluBackward)
      G("sigmoid", SigmoidBackward) G("tanh", TanhBackward)
    #undef G
      return false;
    }
    template <typename C> int run(int argc, char** argv) {
      const std::string mode = argv[1], op = argv[3];
      std::vector<C> r;
      bool known = false;
      if (mode == "unary") known = unary<C>(op, read<C>(argv[4]), r);
      if (mode == "binary") known = binary<C>(op, read<C>(argv[4]), read<C>(argv[5]), r);
      if (mode == "backward") known = backward<C>(op, read<C>(argv[4]), read<C>(argv[5]), read<C>(argv[6]), r);
      if (!known) { std::fprintf(stderr, "unknown %s op %s\n", mode.c_str(), op.c_str()); return 2; }
      write<C>(argv[argc - 1], r);
      return 0;
    }
    int main(int argc, char** argv) {
      const std::string mode = argv[1];
      if (mode == "philox") {  // counter0..3 key0 key1 (hex)
        philox::Words c{{(uint32_t)std::strtoul(argv[2], 0, 16), (uint32_t)std::strtoul(argv[3], 0, 16),
                         (uint32_t)std::strtoul(argv[4], 0, 16), (uint32_t)std::strtoul(argv[5], 0, 16)}};
        const philox::Words w = philox::philox4x32_10(c, (uint32_t)std::strtoul(argv[6], 0, 16),
                                                       (uint32_t)std::strtoul(argv[7], 0, 16));
        std::printf("%08x %08x %08x %08x\n", w.x[0], w.x[1], w.x[2], w.x[3]);
        return 0;
      }
      if (mode == "uniform") {  // the largest value each conversion can give
        std::printf("%.10g %.10g %.10g %.17g\n", philox::uniform_bits(0xffffffffu, 24),
                    philox::uniform_bits(0xffffffffu, 11), philox::uniform_bits(0xffffffffu, 8),
                    philox::uniform_double(0xffffffffu, 0xffffffffu));
        return 0;
      }
      if (mode == "divmod") {  // FastDivmod against / for many divisors and dividends below 2^31
        unsigned long long state = 88172645463325252ull, failures = 0;
        auto next = [&]() { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; };
        for (int t = 0; t < 2000000; ++t) {
          uint32_t d = (t % 3 == 0) ? 1 + next() % 16 : (t % 3 == 1) ? 1 + next() % 70000 : 1 + next() % 0x7fffffff;
          uint32_t n = (t % 5 == 0) ? 0x7fffffffu - next() % 4 : next() % 0x80000000u;
          if (FastDivmod(d).divide(n) != n / d) ++failures;
        }
        std::printf("%llu\n", failures);
        return 0;
      }
      if (mode == "indexer") {  // FastIndexer over merged dims against coordinates worked out by hand
        unsigned long long state = 2463534242ull, failures = 0;
        auto next = [&]() { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; };
        for (int t = 0; t < 3000; ++t) {
          const int ndim = static_cast<int>(next() % 6);
          Dims shape(ndim), s0(ndim), s1(ndim), s2(ndim);
          for (int d = 0; d < ndim; ++d) {
            shape[d] = 1 + static_cast<std::int64_t>(next() % 5);
            s0[d] = static_cast<std::int64_t>(next() % 40) - 10;
            s1[d] = next() % 3 == 0 ? 0 : static_cast<std::int64_t>(next() % 40) - 20;
          }
          std::int64_t stride = 1;  // operand 2 contiguous, so some dims merge
          for (int d = ndim - 1; d >= 0; --d) { s2[d] = stride; stride *= shape[d]; }
          if (t % 2) s0 = s2;
          const FastIndexer<3> indexer(make_strided_indexer<3, std::int32_t>(shape, {&s0, &s1, &s2}));
          for (std::int64_t i = 0; i < stride; ++i) {
            std::int64_t rest = i, expected[3] = {0, 0, 0};
            for (int d = ndim - 1; d >= 0; --d) {
              const std::int64_t c = rest % shape[d];
              rest /= shape[d];
              expected[0] += c * s0[d]; expected[1] += c * s1[d]; expected[2] += c * s2[d];
            }
            std::int32_t got[3];
            indexer.offsets(static_cast<std::uint32_t>(i), got);
            for (int k = 0; k < 3; ++k) failures += got[k] != expected[k];
          }
        }
        std::printf("%llu\n", failures);
        return 0;
      }
      if (mode == "blocks") {  // how iteration spaces beyond int32 are cut: numel, sum, largest count and reach
        const std::vector<std::pair<Dims, std::array<Dims, 2>>> cases = {
            {{3, (1ll << 31) + 5}, {Dims{(1ll << 31) + 5, 1}, Dims{0, 1}}},
            {{1ll << 33}, {Dims{1}, Dims{0}}},
            {{5, 1ll << 20, 1ll << 12}, {Dims{1ll << 32, 1ll << 12, 1}, Dims{1, 5, 5ll << 20}}},
            {{1ll << 16, 1ll << 16}, {Dims{1ll << 16, 1}, Dims{1, -(1ll << 16)}}},
            {{7, 5}, {Dims{5, 1}, Dims{0, 1}}},
        };
        for (const auto& [shape, strides] : cases) {
          std::vector<Int32Block<2>> blocks;
          collect_int32_blocks<2>(shape, strides, 0, {}, blocks);
          std::int64_t total = 1, sum = 0, largest = 0, reach = 0;
          for (std::int64_t n : shape) total *= n;
          for (const auto& b : blocks) {
            std::int64_t n = 1;
            std::int64_t r[2] = {0, 0};
            for (std::size_t d = 0; d < b.shape.size(); ++d) {
              n *= b.shape[d];
              for (int k = 0; k < 2; ++k) {
                const std::int64_t s = strides[k][shape.size() - b.shape.size() + d];
                r[k] += (b.shape[d] - 1) * (s < 0 ? -s : s);
              }
            }
            sum += n;
            largest = std::max(largest, n);
            reach = std::max({reach, r[0], r[1]});
          }
          std::printf("%lld %lld %lld %lld %zu\n", (long long)total, (long long)sum, (long long)largest,
                      (long long)reach, blocks.size());
        }
        return 0;
      }
      const std::string type = argv[2];
      if (type == "f32") return run<float>(argc, argv);
      if (type == "f64") return run<double>(argc, argv);
      if (type == "i32") return run<int32_t>(argc, argv);
      return run<int64_t>(argc, argv);
    }
    """)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """The host harness binary (the kernels' functors and helpers, compiled for the CPU), or skip."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    folder = tmp_path_factory.mktemp("harness")
    source = folder / "harness.cu"
    source.write_text(_HARNESS)
    binary = folder / "harness"
    # (warning 20013: host code reaching the C library's constexpr math through the __host__ __device__ functors)
    command = [
        nvcc,
        "-std=c++17",
        "-O1",
        "-diag-suppress",
        "20013",
        "-I",
        os.path.join(ROOT, "kernels"),
        str(source),
        "-o",
        str(binary),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return folder, binary


def _host_run(harness, mode, type_name, op, *arrays):
    folder, binary = harness
    paths = []
    for i, a in enumerate(arrays):
        path = folder / f"in{i}.bin"
        a.tofile(path)
        paths.append(str(path))
    out = folder / "out.bin"
    done = subprocess.run([str(binary), mode, type_name, op, *paths, str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return np.fromfile(out, dtype=arrays[0].dtype)


_SPECIAL = [
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.0,
    -1.0,
    2.5,
    -2.5,
    3.5,
    1e-30,
    -1e-30,
    1e-4,
    20.0,
    -20.0,
    88.0,
    -100.0,
    1e4,
    np.inf,
    -np.inf,
    np.nan,
]


def _unary_inputs(np_type):
    # more elements than the CPU backend sends to the host module's loops over these very functors
    # (cpu_elementwise._HOST_MAX), so that the reference is the NumPy formulas
    values = np.concatenate([np.array(_SPECIAL), np.random.default_rng(1).standard_normal(400) * 4])
    return values.astype(np_type)


@pytest.mark.parametrize("type_name,np_type,rtol", [("f32", np.float32, 3e-6), ("f64", np.float64, 1e-12)])
@pytest.mark.parametrize("op", sorted(set(cpu.UNARY_OPS) - {"logical_not", "bitwise_not"}))
def test_unary_functors_match_cpu_backend(harness, op, type_name, np_type, rtol):
    x = _unary_inputs(np_type)
    assert x.size > cpu_elementwise._HOST_MAX
    got = _host_run(harness, "unary", type_name, op, x)
    expected = cpu.unary(op, x)
    # cancellation near zeros (1 + tanh(x) for x << 0, sin(k pi)) differs between math libraries
    atol = 1e-6 if np_type == np.float32 else 1e-15
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=op)


# The floating-only binary ops that are one kernel each: every FLOAT_BINARY row of the one elementwise
# table, read from the generated kernels/elementwise_ops.def as the harness includes it
FLOAT_BINARY = re.findall(
    r"^ADCUDA_FLOAT_BINARY\((\w+), \w+\)$", open(os.path.join(ROOT, "kernels", "elementwise_ops.def")).read(), re.M
)
_BINARY_GRID = [-7.5, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 7.5, np.inf, -np.inf, np.nan]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's, for inf * 0 and friends in the reference
@pytest.mark.parametrize("type_name,np_type", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize(
    "op", ["add", "sub", "mul", "pow", "maximum", "minimum", "floor_divide", "remainder"] + FLOAT_BINARY
)
def test_binary_functors_match_cpu_backend(harness, op, type_name, np_type):
    a, b = (g.ravel().astype(np_type) for g in np.meshgrid(_BINARY_GRID, _BINARY_GRID))
    got = _host_run(harness, "binary", type_name, op, a, b)
    expected = cpu.binary(op, a, b, dt.from_numpy_dtype(np.dtype(np_type)))
    np.testing.assert_allclose(got, expected, rtol=1e-6, equal_nan=True, err_msg=op)
    if op in ("copysign", "xlogy"):  # the sign of a zero result is part of their definition
        zero = expected == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(expected[zero]), err_msg=op)
    if op in ("floor_divide", "remainder"):  # NumPy's divmod also fixes the sign of zero results
        zero = expected == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(expected[zero]))


@pytest.mark.parametrize("type_name,np_type,d", [("i32", np.int32, dt.int32), ("i64", np.int64, dt.int64)])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "pow", "maximum", "minimum", "floor_divide", "remainder"])
def test_integer_functors_match_cpu_backend(harness, op, type_name, np_type, d):
    values = [-9, -7, -3, -2, -1, 0, 1, 2, 3, 7, 9]
    a, b = (g.ravel().astype(np_type) for g in np.meshgrid(values, values))
    if op == "pow":
        a, b = a[b >= 0], b[b >= 0]
    if op in ("floor_divide", "remainder"):
        a, b = a[b != 0], b[b != 0]
    got = _host_run(harness, "binary", type_name, op, a, b)
    np.testing.assert_array_equal(got, cpu.binary(op, a, b, d))
    extreme = np.array([np.iinfo(np_type).min], dtype=np_type)
    if op in ("floor_divide", "remainder"):  # the most negative value divided by -1 wraps, as in NumPy
        with np.errstate(all="ignore"):
            expected = getattr(np, op)(extreme, np.array([-1], np_type))
        np.testing.assert_array_equal(
            _host_run(harness, "binary", type_name, op, extreme, np.array([-1], dtype=np_type)), expected
        )


@pytest.mark.parametrize("op", sorted(cpu.UNARY_BACKWARD_OPS))
def test_unary_backward_functors_match_cpu_backend(harness, op):
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(100) * 3, [0.0, 8.0, -8.0]]).astype(np.float32)
    y = cpu.unary(op, x)
    g = rng.standard_normal(x.size).astype(np.float32)
    # relu's backward is given its output as x, as the CPU backend's is
    got = _host_run(harness, "backward", "f32", op, y if op == "relu" else x, y, g)
    # 1 + tanh(x) for x << 0 cancels: fp32 math libraries differ there by up to ~1e-6 absolute
    np.testing.assert_allclose(got, cpu.unary_backward(op, y if op == "relu" else x, y, g), rtol=2e-6, atol=3e-6)


@pytest.mark.parametrize(
    "counter,key,expected",
    [
        # Random123's known-answer vectors for philox4x32-10
        ((0, 0, 0, 0), (0, 0), "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, "408f276d 41c83b0e a20bc7c6 6d5451fd"),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            "d16cfe09 94fdcceb 5001e420 24126ea1",
        ),
    ],
)
def test_philox_known_answers(harness, counter, key, expected):
    _, binary = harness
    args = [f"{v:x}" for v in counter + key]
    done = subprocess.run([str(binary), "philox", *args], capture_output=True, text=True)
    assert done.stdout.split() == expected.split()


def test_uniform_conversions_never_reach_one(harness):
    _, binary = harness
    done = subprocess.run([str(binary), "uniform"], capture_output=True, text=True)
    largest = [float(v) for v in done.stdout.split()]
    f32, f16, bf16, f64 = largest
    assert f32 < 1 and np.float32(f32) < 1
    assert f16 < 1 and np.float16(f16) < 1  # exactly representable: rounding to float16 keeps it below 1
    assert bf16 == 255 / 256
    assert f64 < 1


def test_fast_divmod_matches_division(harness):
    _, binary = harness
    done = subprocess.run([str(binary), "divmod"], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "0"


def test_strided_offsets_over_merged_dims(harness):
    _, binary = harness
    done = subprocess.run([str(binary), "indexer"], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "0"


def test_iteration_beyond_int32_is_cut_into_int32_blocks(harness):
    _, binary = harness
    done = subprocess.run([str(binary), "blocks"], capture_output=True, text=True, timeout=120)
    rows = [[int(v) for v in line.split()] for line in done.stdout.split("\n") if line]
    assert len(rows) == 5, done.stderr
    for total, covered, largest, reach, _count in rows:
        assert covered == total  # every element in exactly one block (blocks tile the outer dims)
        assert largest <= 2**31 - 1 and reach <= 2**31 - 1
    assert rows[-1][4] == 1  # a small shape is one launch
    assert rows[0][4] >= 3 and rows[1][4] >= 4


# =============================================================================================
# GPU parity: primitives
@pytest.fixture(scope="module")
def C():
    from adcuda import _native

    return _native._C


FLOATS = (dt.float32, dt.float16, dt.bfloat16, dt.float64)
TOLERANCE = {dt.float64: (1e-10, 1e-12), dt.float32: (2e-5, 2e-6), dt.float16: (4e-3, 2e-3), dt.bfloat16: (2e-2, 1e-2)}
SHAPES = [(), (0,), (1,), (7,), (1023,), (65537,), (3, 0, 2), (33, 65)]


def check(cb, got, expected, dtype, rtol=None, atol=None):
    tolerance = TOLERANCE.get(dtype)
    if tolerance is not None:
        tolerance = (tolerance[0] if rtol is None else rtol, tolerance[1] if atol is None else atol)
    assert_matches(cb, got, expected, tolerance)


def sample(shape, dtype, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    if dtype is dt.bool_:
        return rng.random(shape) > 0.5
    if dtype.category == dt.INTEGER:
        return rng.integers(-20, 20, size=shape)
    return rng.standard_normal(shape) * scale


def layouts(cb, x_host, dtype):
    """The same values as a contiguous array, a transposed view, a strided slice and (for 1-D) a
    broadcast view: (device array, its values on the host) for each."""
    out = [held(cb, x_host, dtype)]
    if x_host.ndim >= 2:
        t, t_host = held(cb, np.ascontiguousarray(np.swapaxes(x_host, 0, 1)), dtype)
        out.append((cb.permute(t, (1, 0) + tuple(range(2, x_host.ndim))), np.swapaxes(t_host, 0, 1)))
    if x_host.ndim >= 1 and x_host.shape[-1] > 1:
        wide = np.repeat(x_host, 2, axis=-1)
        w, w_host = held(cb, wide, dtype)
        key = (slice(None),) * (x_host.ndim - 1) + (slice(None, None, 2),)
        out.append((cb.slice(w, key), w_host[key]))
    if x_host.ndim == 1 and x_host.size > 0:
        row, row_host = held(cb, x_host[:1], dtype)
        out.append((cb.expand(row, x_host.shape), np.broadcast_to(row_host, x_host.shape)))
    return out


def cpu_reference_dtype(dtype):
    return host_dtype(dtype)


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", sorted(set(cpu.UNARY_OPS) - {"bitwise_not"}))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unary_float(cb, op, dtype, shape):
    if op == "logical_not" and dtype is dt.float64 and shape == (65537,):
        pytest.skip("covered by the other dtypes")
    for a, a_host in layouts(cb, sample(shape, dtype), dtype):
        got = cb.unary(op, a)
        expected = cpu.unary(op, a_host)
        if op == "logical_not":
            check(cb, got, expected, dt.bool_)
        else:
            check(cb, got, expected, dtype, atol=TOLERANCE[dtype][1] * (10 if op in ("sin", "cos", "tanh") else 1))


@gpu
@pytest.mark.parametrize("dtype", [dt.int32, dt.int64, dt.bool_], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["neg", "abs", "relu", "sign", "bitwise_not", "logical_not", "floor", "round", "exp"])
def test_unary_integer_and_bool(cb, op, dtype):
    x = sample((7, 5), dtype)
    for a, a_host in layouts(cb, x, dtype):
        if dtype is dt.bool_ and op in ("neg", "sign"):
            with pytest.raises(TypeError):  # DTypeError here, NumPy's TypeError on the CPU
                cb.unary(op, a)
            continue
        check(cb, cb.unary(op, a), cpu.unary(op, a_host), dt.bool_ if op == "logical_not" else dtype)


ARITHMETIC = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "floor_divide", "remainder"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
BROADCAST_PAIRS = [
    ((7,), (7,)),
    ((1023,), (1,)),
    ((3, 1, 5), (4, 1)),
    ((65537,), ()),
    ((2, 0, 3), (3,)),
    ((), ()),
    ((33, 65), (65,)),
]


def _binary_inputs(op, shape_a, shape_b, dtype):
    a = sample(shape_a, dtype, 1)
    b = sample(shape_b, dtype, 2)
    if op == "pow" and dtype.is_floating_point:
        a = np.abs(a) + 0.5
    if op == "pow" and dtype.category == dt.INTEGER:
        b = np.abs(b) % 4
    if op in ("floor_divide", "remainder", "div") and dtype.category == dt.INTEGER:
        b = np.where(b == 0, 3, b)
    return a, b


@gpu
@pytest.mark.parametrize("dtype", FLOATS + (dt.int32, dt.int64), ids=lambda d: d.name)
@pytest.mark.parametrize("op", ARITHMETIC + COMPARISONS)
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
def test_binary_broadcast(cb, op, dtype, shapes):
    if op == "div" and not dtype.is_floating_point:
        pytest.skip("true division gives floats: the op layer never asks for it in an integer dtype")
    a_np, b_np = _binary_inputs(op, *shapes, dtype)
    ref_dtype = cpu_reference_dtype(dtype)
    for a, a_host in layouts(cb, a_np, dtype)[:2]:
        for b, b_host in layouts(cb, b_np, dtype)[:2]:
            got = cb.binary(op, a, b, dtype)
            expected = cpu.binary(op, a_host, b_host, ref_dtype)
            out_dtype = dt.bool_ if op in COMPARISONS else dtype
            check(cb, got, expected, out_dtype, rtol=5e-5 if op == "pow" and dtype is dt.float32 else None)


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", FLOAT_BINARY)
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
def test_float_binary_broadcast(cb, op, dtype, shapes):
    a_np, b_np = _binary_inputs(op, *shapes, dtype)
    if a_np.size > 2 and b_np.size > 2:  # the special values, each against each other's neighbours
        a_np.flat[:3], b_np.flat[:3] = [0.0, np.nan, -np.inf], [np.inf, 0.0, -0.0]
    ref_dtype = cpu_reference_dtype(dtype)
    for a, a_host in layouts(cb, a_np, dtype)[:2]:
        for b, b_host in layouts(cb, b_np, dtype)[:2]:
            check(cb, cb.binary(op, a, b, dtype), cpu.binary(op, a_host, b_host, ref_dtype), dtype)
    a, a_host = held(cb, a_np, dtype)
    check(cb, cb.binary(op, a, -1.5, dtype), cpu.binary(op, a_host, -1.5, ref_dtype), dtype)
    check(cb, cb.binary(op, 0.0, a, dtype), cpu.binary(op, 0.0, a_host, ref_dtype), dtype)


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.bfloat16, dt.int64), ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "lt", "eq"])
def test_binary_scalar_operands(cb, op, dtype):
    if op == "div" and not dtype.is_floating_point:
        pytest.skip("true division gives floats")
    a_np = np.abs(sample((1023,), dtype)) + (1 if dtype.is_floating_point else 1)
    a, a_host = held(cb, a_np, dtype)
    scalar = 2.5 if dtype.is_floating_point else 3
    ref_dtype = cpu_reference_dtype(dtype)
    out_dtype = dt.bool_ if op in ("lt", "eq") else dtype
    check(cb, cb.binary(op, a, scalar, dtype), cpu.binary(op, a_host, scalar, ref_dtype), out_dtype)
    # scalar first: the CPU backend computes op(scalar, array) through NumPy
    expected = cpu.BINARY_OPS[op](np.asarray(scalar, a_host.dtype), a_host)
    if out_dtype is not dt.bool_:
        expected = np.asarray(expected).astype(a_host.dtype)
    check(cb, cb.binary(op, scalar, a, dtype), expected, out_dtype)


@gpu
def test_binary_mixed_dtypes_and_bool_arithmetic(cb):
    a, a_host = held(cb, np.arange(7), dt.int32)
    b, b_host = held(cb, np.linspace(-1, 1, 7), dt.float32)
    check(cb, cb.binary("add", a, b, dt.float32), cpu.binary("add", a_host, b_host, dt.float32), dt.float32)
    p, p_host = held(cb, np.array([True, False, True, False]), dt.bool_)
    q, q_host = held(cb, np.array([True, True, False, False]), dt.bool_)
    for op in ("add", "mul", "maximum", "minimum", "bitwise_xor", "logical_and", "eq"):
        check(cb, cb.binary(op, p, q, dt.bool_), cpu.binary(op, p_host, q_host, dt.bool_), dt.bool_)


@gpu
def test_binary_errors_match_cpu(cb):
    a = to_device(cb, np.arange(5), dt.int64)
    zero = to_device(cb, np.array([1, 0, 2, 3, 4]), dt.int64)
    with pytest.raises(ZeroDivisionError):
        cb.binary("floor_divide", a, zero, dt.int64)
    with pytest.raises(ZeroDivisionError):
        cb.binary("remainder", a, 0, dt.int64)
    with pytest.raises(InvalidArgumentError, match="negative integer powers"):  # the CPU backend's class
        cb.binary("pow", a, to_device(cb, np.array([1, -1, 2, 0, 1]), dt.int64), dt.int64)
    with pytest.raises(ValueError, match="broadcast"):
        cb.binary(
            "add", to_device(cb, np.zeros((3, 4)), dt.float32), to_device(cb, np.zeros(5), dt.float32), dt.float32
        )


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", sorted(cpu.UNARY_BACKWARD_OPS))
@pytest.mark.parametrize("shape", [(1,), (7,), (1023,), (65537,), (0,), ()], ids=str)
def test_unary_backward(cb, op, dtype, shape):
    x, x_host = held(cb, sample(shape, dtype), dtype)
    g, g_host = held(cb, sample(shape, dtype, 3), dtype)
    y, y_host = held(cb, cpu.unary(op, x_host), dtype)
    from_output = op in ("sigmoid", "tanh")
    saved = y if (from_output or op == "relu") else x
    saved_host = y_host if (from_output or op == "relu") else x_host
    got = cb.unary_backward(op, None if from_output else saved, y if from_output else None, g)
    expected = cpu.unary_backward(op, None if from_output else saved_host, y_host if from_output else None, g_host)
    got_host, expected = to_host(cb, got).astype(np.float64), np.asarray(expected, np.float64)
    assert got_host.shape == expected.shape
    rtol, atol = TOLERANCE[dtype]
    # fp16 and bf16 compute in fp32
    eps = np.finfo(np.float64 if dtype is dt.float64 else np.float32).eps
    allowed = (
        atol
        + rtol * np.abs(expected)
        + TERM_ULPS * eps * np.abs(g_host.astype(np.float64)) * _backward_terms(op, x_host, y_host)
    )
    error = np.abs(got_host - expected)
    wrong = ~((error <= allowed) | (got_host == expected) | (np.isnan(got_host) & np.isnan(expected)))
    where = np.flatnonzero(wrong)[:5]
    assert not wrong.any(), (
        f"{op} {dtype.name}: {wrong.sum()} of {wrong.size} beyond tolerance, e.g. at x = "
        f"{x_host.ravel()[where]}: got {got_host.ravel()[where]}, expected "
        f"{expected.ravel()[where]}, allowed error {allowed.ravel()[where]}"
    )


# Each backward formula is a sum of terms (times g). The GPU rounds each term differently from the CPU (its
# own exp/erf, FMA contraction), by a few ulp of the TERM; where the terms cancel (where the gradient crosses
# zero: gelu and gelu_tanh at x ~ -0.75, silu at x ~ -1.28; tanh's 1 - y^2 near |y| = 1) that is more than a
# relative tolerance of the small result allows. So the tolerance adds TERM_ULPS ulp of |g| * sum(|term|)
# (the emulator needs ~1 there); a wrong formula is off by a fraction of the terms, orders of magnitude more.
TERM_ULPS = 4


def _backward_terms(op, x, y):
    """sum(|term|) of op's gradient (before the factor g) as cpu.UNARY_BACKWARD_OPS writes it, in float64,
    from the forward's input x and output y."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if op == "gelu":  # cdf + x * pdf
        cdf = 0.5 * (1.0 + cpu.unary("erf", x / math.sqrt(2.0)))
        return cdf + np.abs(x) * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    if op == "gelu_tanh":  # s + 2 x s (1 - s) k (1 + 3 c x^2), s = sigmoid(2u)
        k, c = math.sqrt(2.0 / math.pi), 0.044715
        s = cpu.unary("sigmoid", 2.0 * k * (x + c * x**3))
        return s + np.abs(2.0 * x * s * (1.0 - s) * k * (1.0 + 3.0 * c * x * x))
    if op == "silu":  # s + s x (1 - s)
        s = cpu.unary("sigmoid", x)
        return s + np.abs(s * x * (1.0 - s))
    if op == "tanh":  # 1 - y^2
        return 1.0 + y * y
    if op == "sigmoid":  # y (1 - y): one product, nothing cancels
        return y * (1.0 - y)
    assert op == "relu", op  # g or 0, exactly
    return np.zeros_like(x)


@gpu
@pytest.mark.parametrize("dtype", FLOATS + (dt.int64, dt.bool_), ids=lambda d: d.name)
def test_where_broadcast_and_scalars(cb, dtype):
    cond, cond_host = held(cb, sample((4, 1, 7), dt.bool_), dt.bool_)
    a, a_host = held(cb, sample((5, 7), dtype, 1), dtype)
    b, b_host = held(cb, sample((7,), dtype, 2), dtype)
    ref = cpu_reference_dtype(dtype)
    check(cb, cb.where(cond, a, b, dtype), cpu.where(cond_host, a_host, b_host, ref), dtype)
    fill = True if dtype is dt.bool_ else 0
    check(cb, cb.where(cond, a, fill, dtype), cpu.where(cond_host, a_host, fill, ref), dtype)
    check(cb, cb.where(cond, fill, b, dtype), cpu.where(cond_host, fill, b_host, ref), dtype)


@gpu
@pytest.mark.parametrize("dtype", FLOATS + (dt.int32, dt.int64), ids=lambda d: d.name)
@pytest.mark.parametrize("bounds", [(-1, 1), (None, 0.5), (-0.5, None), (2, -2)], ids=str)
def test_clamp(cb, dtype, bounds):
    lo, hi = bounds
    if dtype.category == dt.INTEGER:
        lo, hi = (None if v is None else int(v * 5) for v in bounds)
    x = sample((1023,), dtype)
    if dtype.is_floating_point:
        x[::100] = np.nan
    for a, a_host in layouts(cb, x, dtype):
        check(cb, cb.clamp(a, lo, hi), cpu.clamp(a_host, lo, hi), dtype)


# ---------------------------------------------------------------------------------------------
# reductions
REDUCE_CASES = [
    ((7,), (0,)),
    ((1023,), (0,)),
    ((65537,), (0,)),
    ((33, 65), (1,)),
    ((33, 65), (0,)),
    ((4, 5, 6), (0, 2)),
    ((4, 5, 6), (1,)),
    ((4, 5, 6), (0, 1, 2)),
    ((4, 5, 6), ()),
    ((), ()),
    ((3, 0, 2), (1,)),
    ((3, 0, 2), (0, 2)),
    ((1, 1, 300), (2,)),
    ((300, 3), (0,)),
]


@gpu
@pytest.mark.parametrize("dtype", FLOATS + (dt.int32, dt.int64, dt.bool_), ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "amax", "amin", "all", "any"])
@pytest.mark.parametrize("case", REDUCE_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce(cb, op, dtype, case, keepdim):
    shape, axes = case
    if op == "mean" and not dtype.is_floating_point:
        pytest.skip("mean of integers is refused by the op layer")
    x = sample(shape, dtype, scale=1.0)
    if op == "prod" and dtype.is_floating_point:
        x = 1 + x / 50
    for a, a_host in layouts(cb, x, dtype):
        if op in ("amax", "amin") and a_host.size == 0 and any(a_host.shape[ax] == 0 for ax in axes):
            with pytest.raises(ValueError):
                cb.reduce(op, a, axes, keepdim)
            continue
        got = cb.reduce(op, a, axes, keepdim)
        expected = cpu.reduce(op, a_host, axes, keepdim)
        out = dt.from_numpy_dtype(expected.dtype) if dtype is not dt.bfloat16 or op in ("all", "any") else dtype
        n = max(1, int(np.prod([a_host.shape[ax] for ax in axes])) if axes else 1)
        # sums accumulate in another order than NumPy's pairwise sum: error grows like sqrt(n)
        atol = TOLERANCE.get(out, (0, 0))[1] * (math.sqrt(n) if op in ("sum", "mean") else 1)
        check(cb, got, expected, out, atol=atol if out in TOLERANCE else None)


@gpu
def test_reduce_huge_full_sum_takes_the_split_path(cb):
    n = 1 << 24  # 64 MiB of float32: one output, thousands of blocks per split
    x = np.random.default_rng(5).random(n, dtype=np.float32)
    a = to_device(cb, x, dt.float32)
    got = float(to_host(cb, cb.reduce("sum", a, (0,), False)))
    assert got == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-5)
    half = to_device(cb, x, dt.float16)
    assert float(to_host(cb, cb.reduce("mean", half, (0,), False))) == pytest.approx(0.5, abs=2e-3)
    i = to_device(cb, np.ones(n, dtype=np.int32), dt.int32)
    assert int(to_host(cb, cb.reduce("sum", i, (0,), False))) == n


@pytest.mark.parametrize("dtype", FLOATS + (dt.int32, dt.int64, dt.bool_), ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize(
    "case",
    [
        ((7,), 0),
        ((1023,), None),
        ((33, 65), 1),
        ((33, 65), 0),
        ((4, 5, 6), None),
        ((4, 5, 6), 1),
        ((65537,), 0),
        ((), None),
    ],
    ids=str,
)
@gpu
@pytest.mark.parametrize("keepdim", [False, True])
def test_argreduce_first_occurrence_and_nan(cb, op, dtype, case, keepdim):
    shape, axis = case
    x = np.round(sample(shape, dtype, scale=2.0)) if dtype.is_floating_point else sample(shape, dtype)
    if dtype.is_floating_point and x.size > 10:
        x.reshape(-1)[[3, 9]] = np.nan  # the first NaN wins, as in NumPy
    for a, a_host in layouts(cb, x, dtype):
        check(cb, cb.argreduce(op, a, axis, keepdim), cpu.argreduce(op, a_host, axis, keepdim), dt.int64)


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", REDUCE_CASES[:10], ids=str)
@pytest.mark.parametrize("correction", [0, 1])
def test_var(cb, dtype, case, correction):
    shape, axes = case
    for a, a_host in layouts(cb, sample(shape, dtype) + 5, dtype):
        got = cb.var(a, axes, correction, False)
        check(cb, got, cpu.var(a_host, axes, correction, False), dtype, rtol=TOLERANCE[dtype][0] * 20)


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", REDUCE_CASES[:10], ids=str)
def test_logsumexp(cb, dtype, case):
    shape, axes = case
    x = sample(shape, dtype, scale=10.0)
    if x.ndim == 2:
        x[0] = -np.inf  # a row of -inf gives -inf; +inf and NaN propagate
        x[1, 3] = np.inf
        x[2, 5] = np.nan
    for a, a_host in layouts(cb, x, dtype):
        check(cb, cb.logsumexp(a, axes, True), cpu.logsumexp(a_host, axes, True), dtype)


@pytest.mark.parametrize("dtype", FLOATS + (dt.int32, dt.int64, dt.bool_), ids=lambda d: d.name)
@pytest.mark.parametrize(
    "case", [((7,), 0), ((1023,), 0), ((33, 65), 1), ((33, 65), 0), ((4, 5, 6), 1), ((0, 3), 0), ((65537,), 0)], ids=str
)
@gpu
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_nan_last(cb, dtype, case, descending):
    shape, axis = case
    x = np.round(sample(shape, dtype, scale=2.0)) if dtype.is_floating_point else sample(shape, dtype)
    if dtype.is_floating_point and x.size > 10:
        x.reshape(-1)[[2, 7]] = np.nan
        x.reshape(-1)[[4, 5]] = [-0.0, 0.0]
    for a, a_host in layouts(cb, x, dtype)[:3]:
        values, indices = cb.sort(a, axis, descending, True)
        ref_values, ref_indices = cpu.sort(a_host, axis, descending, True)
        check(cb, indices, ref_indices, dt.int64)
        check(cb, values, ref_values, dtype)


@pytest.mark.parametrize("dtype", FLOATS + (dt.int32, dt.int64, dt.bool_), ids=lambda d: d.name)
@pytest.mark.parametrize(
    "case", [((7,), 0), ((1023,), 0), ((33, 65), 1), ((33, 65), 0), ((65537,), 0), ((0,), 0), ((), 0)], ids=str
)
@gpu
def test_cumsum(cb, dtype, case):
    shape, axis = case
    for a, a_host in layouts(cb, sample(shape, dtype, scale=1.0), dtype)[:3]:
        expected = cpu.cumsum(a_host, axis)
        n = a_host.shape[axis] if a_host.ndim else 1
        rtol, atol = TOLERANCE.get(dtype, (0, 0))
        check(
            cb,
            cb.cumsum(a, axis),
            expected,
            dtype if dtype.is_floating_point else dt.int64,
            atol=atol * math.sqrt(n) * 4 if dtype in TOLERANCE else None,
        )


# ---------------------------------------------------------------------------------------------
# indexing and layout
def _device_key(cb, key):
    out = []
    for k in key:
        if isinstance(k, np.ndarray) and k.ndim >= 0 and not isinstance(k, np.bool_):
            out.append(cb.from_numpy(k, dt.bool_ if k.dtype == bool else dt.int64))
        else:
            out.append(k)
    return tuple(out)


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.bfloat16, dt.int64, dt.bool_), ids=lambda d: d.name)
def test_index_random_keys_match_cpu(cb, dtype):
    rng = np.random.default_rng(7)
    for trial in range(150):
        shape = [(5,), (5, 3), (5, 3, 4), (2, 3, 4, 5)][trial % 4]
        x = sample(shape, dtype, trial)
        key = _random_key(rng, shape)
        for a, a_host in layouts(cb, x, dtype)[:2]:
            try:
                expected = cpu.index(a_host, key)
            except (IndexError, ValueError):
                with pytest.raises((IndexError, ValueError)):  # an index out of range: raised at the sync
                    cb.to_numpy(cb.index(a, _device_key(cb, key)))
                continue
            check(cb, cb.index(a, _device_key(cb, key)), expected, dtype)


@pytest.mark.parametrize(
    "dtype", (dt.float32, dt.float16, dt.bfloat16, dt.float64, dt.int32, dt.int64), ids=lambda d: d.name
)
@gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_index_put_accumulate_sums_duplicates(cb, dtype, deterministic):
    previous = cb.deterministic_indexing()
    cb.set_deterministic_indexing(deterministic)
    try:
        base_np = sample((50, 7), dtype, 1, scale=1.0)
        rows = np.random.default_rng(3).integers(-50, 50, size=1000)
        values_np = sample((1000, 7), dtype, 2, scale=1.0)
        base, base_host = held(cb, base_np, dtype)
        values, values_host = held(cb, values_np, dtype)
        cb.index_put_(base, (cb.from_numpy(rows, dt.int64),), values, True)
        expected = cpu.index_put_(base_host.astype(np.float64), (rows,), values_host.astype(np.float64), True)
        rtol, atol = TOLERANCE.get(dtype, (0, 0))
        check(cb, base, expected.astype(base_host.dtype), dtype, atol=atol * 40 if dtype in TOLERANCE else None)
        if deterministic and dtype.is_floating_point:  # bit for bit the same on a second run
            again, _ = held(cb, base_np, dtype)
            cb.index_put_(again, (cb.from_numpy(rows, dt.int64),), values, True)
            np.testing.assert_array_equal(to_host(cb, again), to_host(cb, base))
    finally:
        cb.set_deterministic_indexing(previous)


@gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_index_put_last_duplicate_wins_when_deterministic(cb, deterministic):
    previous = cb.deterministic_indexing()
    cb.set_deterministic_indexing(deterministic)
    try:
        base, base_host = held(cb, np.zeros(10), dt.float32)
        idx = np.array([1, 3, 1, 1, 9, 3])
        vals = np.arange(6, dtype=np.float32)
        cb.index_put_(base, (cb.from_numpy(idx, dt.int64),), cb.from_numpy(vals, dt.float32), False)
        got = to_host(cb, base)
        assert set(got[[1, 3, 9]]) <= set(vals) and got[9] == 4
        if deterministic:
            np.testing.assert_array_equal(got, cpu.index_put_(base_host.copy(), (idx,), vals, False))
    finally:
        cb.set_deterministic_indexing(previous)


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.bfloat16, dt.int64, dt.bool_), ids=lambda d: d.name)
@pytest.mark.parametrize("key_kind", ["mask", "mixed", "basic", "scalar_value"])
def test_index_put_matches_cpu(cb, dtype, key_kind):
    x = sample((6, 5, 4), dtype, 4)
    a, a_host = held(cb, x, dtype)
    a_host = a_host.copy()
    if key_kind == "mask":
        mask = sample((6, 5), dt.bool_, 5)
        key, values_np = (mask,), sample((int(mask.sum()), 4), dtype, 6)
    elif key_kind == "mixed":
        key, values_np = (slice(1, 5), np.array([0, 4, -1]), Ellipsis), sample((4,), dtype, 7)
    elif key_kind == "basic":
        key, values_np = (slice(None, None, 2), 1), sample((3, 4), dtype, 8)
    else:
        key, values_np = (np.array([5, 0]),), True if dtype is dt.bool_ else 3
    if isinstance(values_np, np.ndarray):
        values, values_host = held(cb, values_np, dtype)
    else:
        values = values_host = values_np
    cb.index_put_(a, _device_key(cb, key), values, False)
    check(cb, a, cpu.index_put_(a_host, key, values_host, False), dtype)


@gpu
def test_index_errors(cb):
    a = to_device(cb, np.zeros((4, 3)), dt.float32)
    # indices out of range are found on the device and raised at the next synchronising call
    with pytest.raises(IndexError, match="out of bounds"):
        cb.to_numpy(cb.index(a, (cb.from_numpy(np.array([0, 4]), dt.int64),)))
    with pytest.raises(IndexError, match="out of bounds"):
        cb.index_put_(a, (slice(None), cb.from_numpy(np.array([-4]), dt.int64)), 1.0, False)
        cb.to_numpy(a)
    with pytest.raises(ValueError, match="could not be broadcast"):
        cb.index_put_(a, (cb.from_numpy(np.array([0, 1]), dt.int64),), to_device(cb, np.zeros(4), dt.float32), False)
    np.testing.assert_array_equal(to_host(cb, a), 0)  # nothing was written by the refused calls
    previous = cb.deterministic_indexing()
    cb.set_deterministic_indexing(True)
    try:  # the sorted scatters skip an index out of range too
        for accumulate in (False, True):
            b = to_device(cb, np.zeros((4, 3)), dt.float32)
            with pytest.raises(IndexError, match="index 7 is out of bounds"):
                cb.index_put_(b, (cb.from_numpy(np.array([1, 7, 1]), dt.int64),), 1.0, accumulate)
                cb.to_numpy(b)
            np.testing.assert_array_equal(to_host(cb, b), [[0] * 3, [1 + accumulate] * 3, [0] * 3, [0] * 3])
    finally:
        cb.set_deterministic_indexing(previous)


@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.bfloat16, dt.int64), ids=lambda d: d.name)
@pytest.mark.parametrize(
    "case",
    [((5, 7), (3, 7), 0), ((5, 7), (5, 2), 1), ((4, 5, 6), (2, 5, 3), 2), ((65537,), (1023,), 0), ((3, 0), (3, 0), 1)],
    ids=str,
)
@gpu
def test_gather_and_scatter_add(cb, dtype, case):
    shape, idx_shape, axis = case
    x = sample(shape, dtype, 1)
    idx_np = (
        np.random.default_rng(2).integers(0, shape[axis], size=idx_shape)
        if shape[axis]
        else np.zeros(idx_shape, np.int64)
    )
    idx = cb.from_numpy(idx_np, dt.int64)
    for a, a_host in layouts(cb, x, dtype)[:2]:
        check(cb, cb.gather(a, axis, idx), cpu.gather(a_host, axis, idx_np), dtype)
        src, src_host = held(cb, sample(idx_shape, dtype, 3), dtype)
        expected = cpu.scatter_add(a_host.astype(np.float64), axis, idx_np, src_host.astype(np.float64))
        rtol, atol = TOLERANCE.get(dtype, (0, 0))
        check(
            cb,
            cb.scatter_add(a, axis, idx, src),
            expected.astype(a_host.dtype),
            dtype,
            atol=atol * 10 if dtype in TOLERANCE else None,
        )


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.int64, dt.bool_, dt.float64), ids=lambda d: d.name)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_cat_contiguous_strided_and_many(cb, dtype, axis):
    rng = np.random.default_rng(axis)
    parts, hosts = [], []
    for i in range(70):  # more than one batch of 64
        shape = [3, 4, 5]
        shape[axis] = int(rng.integers(0, 4))
        x = sample(tuple(shape), dtype, i)
        views = layouts(cb, x, dtype)
        a, a_host = views[i % len(views)] if x.ndim >= 2 else views[0]
        parts.append(a)
        hosts.append(a_host)
    check(cb, cb.cat(parts, axis), cpu.cat(hosts, axis), dtype)


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.bool_, dt.int64), ids=lambda d: d.name)
@pytest.mark.parametrize("k", [-7, -1, 0, 1, 2, 100])
@pytest.mark.parametrize("shape", [(5, 7), (7, 5), (3, 4, 6), (1, 1), (0, 3)], ids=str)
def test_tril_triu(cb, dtype, k, shape):
    for a, a_host in layouts(cb, sample(shape, dtype), dtype):
        check(cb, cb.tril(a, k), cpu.tril(a_host, k), dtype)
        check(cb, cb.triu(a, k), cpu.triu(a_host, k), dtype)


# ---------------------------------------------------------------------------------------------
# random
@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_random_reproducible_and_independent_of_launch_shape(cb, dtype):
    first = to_host(cb, cb.rand((1000,), dtype, 1234, 77))
    np.testing.assert_array_equal(first, to_host(cb, cb.rand((1000,), dtype, 1234, 77)))
    # element i depends only on (seed, offset, i): a smaller draw is a prefix, any shape the same stream
    np.testing.assert_array_equal(to_host(cb, cb.rand((7,), dtype, 1234, 77)), first[:7])
    np.testing.assert_array_equal(to_host(cb, cb.rand((10, 100), dtype, 1234, 77)).ravel(), first)
    assert not np.array_equal(first, to_host(cb, cb.rand((1000,), dtype, 1234, 78)))
    assert not np.array_equal(first, to_host(cb, cb.rand((1000,), dtype, 1235, 77)))
    normal = to_host(cb, cb.randn((1001,), dtype, 9, 0))
    np.testing.assert_array_equal(normal[:5], to_host(cb, cb.randn((5,), dtype, 9, 0)))


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_random_statistics(cb, dtype):
    n = 1 << 20
    u = to_host(cb, cb.rand((n,), dtype, 42, 0)).astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.01
    z = to_host(cb, cb.randn((n,), dtype, 43, 0)).astype(np.float64)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.02
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.01


@gpu
@pytest.mark.parametrize("dtype", (dt.int64, dt.int32, dt.float32), ids=lambda d: d.name)
@pytest.mark.parametrize("low,high", [(0, 10), (-5, 3), (0, 1), (-(1 << 40), 1 << 40)])
def test_randint_range_and_coverage(cb, dtype, low, high):
    if dtype is dt.int32 and high - low > 1 << 31:
        pytest.skip("values do not fit int32")
    if dtype is dt.float32 and high - low > 1 << 24:
        pytest.skip("values are not exact in float32")
    x = to_host(cb, cb.randint(low, high, (100000,), dtype, 5, 0)).astype(np.float64)
    assert x.min() >= low and x.max() < high and np.all(x == np.round(x))
    if high - low <= 10:
        assert set(np.unique(x)) == set(range(low, high))
    with pytest.raises(ValueError):
        cb.randint(3, 3, (2,), dtype, 0, 0)


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.bool_, dt.bfloat16), ids=lambda d: d.name)
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_bernoulli(cb, dtype, p):
    x = to_host(cb, cb.bernoulli((200000,), p, dtype, 11, 3)).astype(np.float64)
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert abs(x.mean() - p) < 0.01


@gpu
def test_random_factories_use_device_generator(cb):
    adcuda.manual_seed(3)
    a = adcuda.rand(5, device="cuda").cpu().numpy()
    b = adcuda.rand(5, device="cuda").cpu().numpy()
    adcuda.manual_seed(3)
    np.testing.assert_array_equal(adcuda.rand(5, device="cuda").cpu().numpy(), a)
    assert not np.array_equal(a, b)


@gpu
def test_empty_and_zero_d_everywhere(cb):
    for dtype in (dt.float32, dt.int64, dt.bool_):
        empty = to_device(cb, np.zeros((0, 3)), dtype)
        assert cb.shape_of(cb.unary("abs" if dtype is not dt.bool_ else "logical_not", empty)) == (0, 3)
        assert cb.shape_of(cb.binary("eq", empty, 1, dtype)) == (0, 3)
        check(
            cb,
            cb.reduce("sum", empty, (0,), False),
            cpu.reduce("sum", np.zeros((0, 3), dtype.numpy), (0,), False),
            dt.int64 if dtype is not dt.float32 else dtype,
        )
        assert cb.shape_of(cb.rand((0, 2), dt.float32, 0, 0)) == (0, 2)
        assert cb.shape_of(cb.cat([empty, empty], 0)) == (0, 3)
    zero_d, zero_d_host = held(cb, np.array(2.5), dt.float32)
    check(cb, cb.binary("mul", zero_d, zero_d, dt.float32), np.array(6.25, np.float32), dt.float32)
    check(cb, cb.reduce("sum", zero_d, (), False), np.array(2.5, np.float32), dt.float32)
    check(cb, cb.argreduce("argmax", zero_d, None, False), np.array(0), dt.int64)


# =============================================================================================
# every op forward and backward through the Tensor API, CUDA against the CPU
def _ops():
    F = adcuda.nn.functional
    return {
        "add": (lambda x, y: x + y, 2),
        "sub": (lambda x, y: x - 2 * y, 2),
        "mul": (lambda x, y: x * y, 2),
        "div": (lambda x, y: x / (y.abs() + 1), 2),
        "pow": (lambda x, y: (x.abs() + 0.5) ** y, 2),
        "pow_scalar": (lambda x: x**3, 1),
        "rpow": (lambda x: 2**x, 1),
        "neg": (lambda x: -x, 1),
        "abs": (lambda x: x.abs(), 1),
        "exp": (lambda x: x.exp(), 1),
        "log": (lambda x: (x.abs() + 0.1).log(), 1),
        "log1p": (lambda x: x.abs().log1p(), 1),
        "sqrt": (lambda x: (x.abs() + 0.1).sqrt(), 1),
        "rsqrt": (lambda x: (x.abs() + 0.1).rsqrt(), 1),
        "sin": (lambda x: x.sin(), 1),
        "cos": (lambda x: x.cos(), 1),
        "tanh": (lambda x: x.tanh(), 1),
        "sigmoid": (lambda x: x.sigmoid(), 1),
        "relu": (lambda x: x.relu(), 1),
        "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), 1),
        "gelu": (lambda x: F.gelu(x), 1),
        "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), 1),
        "silu": (lambda x: F.silu(x), 1),
        "clamp": (lambda x: x.clamp(-0.5, 0.5), 1),
        "maximum": (lambda x, y: adcuda.maximum(x, y), 2),
        "minimum": (lambda x, y: adcuda.minimum(x, y), 2),
        "where": (lambda x, y: adcuda.where(x > y, x, y), 2),
        "sign": (lambda x: x * x.sign(), 1),
        "erf": (lambda x: adcuda.erf(x), 1),
        "sum": (lambda x: x.sum(), 1),
        "sum_dim": (lambda x: x.sum(1, keepdim=True), 1),
        "mean": (lambda x: x.mean(0), 1),
        "var": (lambda x: x.var(1), 1),
        "std": (lambda x: x.std(0), 1),
        "logsumexp": (lambda x: adcuda.logsumexp(x, 1), 1),
        "amax": (lambda x: x.amax(1), 1),
        "max_dim": (lambda x: x.max(1).values, 1),
        "min": (lambda x: x.min(), 1),
        "prod": (lambda x: (1 + x / 10).prod(1), 1),
        "norm": (lambda x: x.norm(), 1),
        "broadcast": (lambda x, y: x + y[0], 2),
        "expand_sum": (lambda x: x[:1].expand(4, 5) * x, 1),
        "transpose": (lambda x: x.T.contiguous() * 2, 1),
        "cat": (lambda x, y: adcuda.cat([x, y, x], 1), 2),
        "stack": (lambda x, y: adcuda.stack([x, y], 0), 2),
        "flip": (lambda x: x.flip(0) * x, 1),
        "repeat": (lambda x: x.repeat(2, 3), 1),
        "getitem_basic": (lambda x: x[1:3, ::2], 1),
        "getitem_int_array": (lambda x: x[adcuda.tensor([0, 2, 2, 3], device=x.device)], 1),
        "getitem_mask": (lambda x: x[x > 0], 1),
        "getitem_mixed": (lambda x: x[:, adcuda.tensor([4, 0], device=x.device)], 1),
        "gather": (lambda x: x.gather(1, adcuda.tensor([[0, 1], [4, 4], [2, 0], [3, 3]], device=x.device)), 1),
        "scatter_add": (lambda x, y: x.scatter_add(0, adcuda.tensor([[1, 0, 3, 3, 1]], device=x.device), y), 2),
        "index_select": (lambda x: x.index_select(1, adcuda.tensor([4, 1, 1], device=x.device)), 1),
        "masked_fill": (lambda x: x.masked_fill(x > 0.5, 0.0), 1),
        "tril": (lambda x: x.tril(1), 1),
        "triu": (lambda x: x.triu(-1), 1),
        "sort": (lambda x: x.sort(1).values, 1),
        "cumsum": (lambda x: x.cumsum(0), 1),
        "softmax": (lambda x: F.softmax(x, 1), 1),
        "reshape_sum": (lambda x: x.reshape(2, 10).sum(0), 1),
    }


@gpu
@pytest.mark.parametrize("dtype", (dt.float32, dt.float16, dt.bfloat16), ids=lambda d: d.name)
@pytest.mark.parametrize("name", sorted(_ops()))
def test_op_forward_and_backward_match_cpu(name, dtype):
    fn, arity = _ops()[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    inputs = [rng.standard_normal((4, 5)) for _ in range(arity)]
    # the CPU reference sees the values the dtype holds (bf16 rounded, computed in fp32 on the CPU)
    rounded = [adcuda.tensor(x, dtype=dtype, device="cuda").float().cpu().numpy() for x in inputs]
    cpu_dtype = dt.float32 if dtype is dt.bfloat16 else dtype
    xs_cpu = [adcuda.tensor(x, dtype=cpu_dtype, requires_grad=True) for x in rounded]
    xs_gpu = [adcuda.tensor(x, dtype=dtype, device="cuda", requires_grad=True) for x in rounded]
    y_cpu, y_gpu = fn(*xs_cpu), fn(*xs_gpu)
    g = rng.standard_normal(tuple(y_cpu.shape))
    y_cpu.backward(adcuda.tensor(g, dtype=cpu_dtype))
    y_gpu.backward(adcuda.tensor(g, dtype=dtype, device="cuda"))
    rtol, atol = TOLERANCE[dtype]
    scale = 10 if dtype is not dt.float32 else 1
    np.testing.assert_allclose(
        y_gpu.detach().float().cpu().numpy(), y_cpu.detach().float().numpy(), rtol=rtol * scale, atol=atol * scale
    )
    for x_cpu, x_gpu in zip(xs_cpu, xs_gpu):
        np.testing.assert_allclose(
            x_gpu.grad.float().cpu().numpy(),
            x_cpu.grad.float().numpy(),
            rtol=rtol * scale,
            atol=atol * scale * 4,
            err_msg=name,
        )


# a selection of the foundation's gradient checks, on the GPU in float64: the analytical vector-Jacobian
# product (backward) against central differences of the forward, both computed on the device
GRADCHECK_OPS = [
    "mul",
    "div",
    "pow",
    "exp",
    "log",
    "tanh",
    "sigmoid",
    "gelu",
    "silu",
    "sum_dim",
    "var",
    "logsumexp",
    "max_dim",
    "prod",
    "norm",
    "broadcast",
    "cat",
    "getitem_mask",
    "gather",
    "scatter_add",
    "sort",
    "cumsum",
    "where",
    "clamp",
    "softmax",
]


@gpu
@pytest.mark.parametrize("name", GRADCHECK_OPS)
def test_gradcheck_float64_on_cuda(name):
    fn, arity = _ops()[name]
    rng = np.random.default_rng(11)
    xs = [
        adcuda.tensor(rng.standard_normal((4, 5)), dtype=dt.float64, device="cuda", requires_grad=True)
        for _ in range(arity)
    ]
    y = fn(*xs)
    u = adcuda.tensor(rng.standard_normal(tuple(y.shape)), dtype=dt.float64, device="cuda")
    grads = adcuda.autograd.grad((y * u).sum(), xs, allow_unused=True)
    eps = 1e-6
    for k in range(len(xs)):
        v = rng.standard_normal((4, 5))
        analytical = float((grads[k].cpu().numpy() * v).sum()) if grads[k] is not None else 0.0
        with adcuda.no_grad():
            shifted = []
            for sign in (1, -1):
                args = [
                    adcuda.tensor(
                        t.detach().cpu().numpy() + (sign * eps * v if i == k else 0), dtype=dt.float64, device="cuda"
                    )
                    for i, t in enumerate(xs)
                ]
                shifted.append(float((fn(*args) * u).sum().cpu().item()))
        numerical = (shifted[0] - shifted[1]) / (2 * eps)
        assert analytical == pytest.approx(numerical, rel=1e-4, abs=1e-6), name
