#!/usr/bin/env bash
# The one prepared command for a GPU machine without internet access (Python with PyTorch, CuPy,
# pybind11, scikit-build-core, numpy, pytest, CMake, ninja and nvcc installed):
#
#     scripts/gpu_check.sh OUTDIR
#
# builds adcuda with CUDA (ADCUDA_CUDA_ARCHS, default 90: sm_90 code plus PTX, the fastest build for an
# H100/H200) into a virtual environment that sees the machine's packages, prints `adcuda info`, runs
# every test marked `cuda`, runs compute-sanitizer (memcheck and racecheck) on a small multi-threaded
# program where the sanitizer exists, and runs the GPU benchmarks. Every step has a time limit and the
# whole run stays inside GPU_CHECK_BUDGET seconds (default 540); steps that no longer fit are skipped
# and say so. OUTDIR receives flat log files only (build.log, info.txt, pytest.log, sanitizer.log,
# bench.log, bench.json, summary.txt). The exit status is the number of failed steps.
#
# Narrower runs: GPU_CHECK_TESTS (pytest paths and options, default the whole tests/ folder, e.g.
# "tests/test_cuda_runtime.py -k allocator") and GPU_CHECK_BENCH_SUITES (default all, e.g.
# "cuda_runtime,gemm"; "none" skips the benchmarks).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
budget=${GPU_CHECK_BUDGET:-540}
python=${PYTHON:-python3}
venv=${GPU_CHECK_VENV:-/tmp/adcuda-gpu-check-venv}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
summary="$out/summary.txt"
: >"$summary"

note() { echo "$*" | tee -a "$summary"; }

# run_step NAME CAP_SECONDS LOG COMMAND...: runs COMMAND (output appended to LOG) under a time limit
# that also respects what is left of the budget.
run_step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local left=$((budget - SECONDS - 10))
  if [ "$left" -lt 20 ]; then
    note "SKIPPED  $name: only $((budget - SECONDS)) s of the ${budget} s budget left"
    failed=$((failed + 1))
    return 1
  fi
  local limit=$((cap < left ? cap : left))
  local start=$SECONDS status
  echo "== $name (limit ${limit}s): $*" >>"$log"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  status=$?
  if [ "$status" -eq 0 ]; then
    note "OK       $name ($((SECONDS - start)) s)"
  else
    [ "$status" -eq 124 ] && echo "== $name: killed after ${limit} s" >>"$log"
    note "FAILED   $name: exit status $status after $((SECONDS - start)) s (see $(basename "$log"))"
    failed=$((failed + 1))
  fi
  return "$status"
}

note "adcuda gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), repo $repo, $($python --version 2>&1)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$summary" 2>/dev/null || true

# A virtual environment over the machine's packages: the build and install touch nothing else.
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv" >>"$out/build.log" 2>&1
fi
py="$venv/bin/python"
shopt -s nullglob
wheels=("$repo"/shared/wheels/nvtx*.whl "$repo"/wheels/*.whl)
shopt -u nullglob
if [ ${#wheels[@]} -gt 0 ]; then
  run_step "install carried wheels" 60 "$out/build.log" "$py" -m pip install --no-index --no-deps "${wheels[@]}"
fi

export ADCUDA_CUDA=ON ADCUDA_CUDA_ARCHS=${ADCUDA_CUDA_ARCHS:-90}
if ! run_step "build adcuda (ADCUDA_CUDA_ARCHS=$ADCUDA_CUDA_ARCHS)" 360 "$out/build.log" \
    "$py" -m pip install -v --no-build-isolation --no-deps --force-reinstall "$repo" \
    -Cbuild-dir="$repo/build/gpu-check"; then
  tail -n 40 "$out/build.log" >>"$summary"
  note "the build failed: nothing else can run"
  exit "$failed"
fi

# From a scratch folder, so that the source tree (no compiled module in it) cannot shadow the install.
cd "$scratch" || exit 1
if [ -f "$repo/adcuda/__main__.py" ]; then
  run_step "adcuda info" 60 "$out/info.txt" "$py" -m adcuda info
else
  run_step "adcuda info" 60 "$out/info.txt" "$py" -c "import adcuda._info as i; i.print_info()"
fi
grep -E "^(running on|  cuda:)" "$out/info.txt" >>"$summary"

read -r -a tests <<<"${GPU_CHECK_TESTS:-tests}"
for i in "${!tests[@]}"; do
  case ${tests[$i]} in tests*) tests[$i]="$repo/${tests[$i]}" ;; esac
done
run_step "pytest -m cuda ${GPU_CHECK_TESTS:-tests}" 300 "$out/pytest.log" \
  "$py" -P -m pytest "${tests[@]}" -m cuda -q -rs --durations=15 -p no:cacheprovider
grep -E "^(FAILED|ERROR) |[0-9]+ (passed|failed|skipped|error)" "$out/pytest.log" | tail -n 40 >>"$summary"

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
if [ -n "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    run_step "compute-sanitizer --tool $tool" 150 "$out/sanitizer.log" \
      "$sanitizer" --tool "$tool" --error-exitcode 3 "$py" "$repo/scripts/cuda_runtime_workload.py"
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|all results right" "$out/sanitizer.log" >>"$summary"
else
  note "SKIPPED  compute-sanitizer: not found on PATH or under /usr/local/cuda*/bin"
fi

suites=${GPU_CHECK_BENCH_SUITES:-all}
if [ "$suites" != "none" ]; then
  run_step "GPU benchmarks ($suites)" 180 "$out/bench.log" \
    "$py" "$repo/benchmarks/run.py" --device cuda --quick --timeout 90 --suites "$suites" --json "$out/bench.json"
  grep -E "^[a-z_]+ +(ok|failed|skipped) " "$out/bench.log" | cut -c1-160 >>"$summary"
fi

note "done in $SECONDS s; $failed step(s) failed or skipped"
exit "$failed"
