#!/usr/bin/env bash
# The one prepared command for a lent GPU machine (no internet; python3 with PyTorch, CuPy, pybind11,
# scikit-build-core, numpy, pytest, CMake, ninja; nvcc, nvidia-smi, compute-sanitizer on PATH):
#
#     PYTHON=python3 bash scripts/gpu_check.sh OUTDIR
#
# Steps, in this order, each under a time limit taken from one budget (GPU_CHECK_BUDGET seconds,
# default 540; time a step leaves unused goes to the later ones):
#   preflight   ~5 s: the imports the run needs, cmake/ninja/nvcc versions, nvidia-smi; stops at once,
#               saying what is missing, before anything is built
#   build       pip install --no-build-isolation --no-deps into $PYTHON itself (no venv: on the lent
#               machine python3 is a venv already, and a venv made from it would not see its packages),
#               machine code for the detected GPU's compute capability only
#   info        `adcuda info`; stops here when adcuda cannot use the GPU (every later step would skip)
#   bench:NAME  one step per benchmark suite (GPU_CHECK_BENCH_SUITES), its results merged into
#               OUTDIR/bench.json as soon as it finishes
#   tests       pytest -m cuda (GPU_CHECK_TESTS), -n with pytest-xdist, --timeout with pytest-timeout
#   memcheck, racecheck, synccheck
#               compute-sanitizer on scripts/cuda_runtime_workload.py (every kernel family, odd shapes)
# OUTDIR gets at most 8 files: summary.md (every step, every figure; rewritten after each step, so a
# run cut short still leaves one), build.log, info.txt, bench.log, bench.json, pytest.log,
# sanitizer.log. A step whose tests or benchmarks all skipped has failed. Exit status: 0 when every
# step passed, else the number of failed steps (at least 1).
#
# Wheels the machine lacks (nvtx) travel in the checkout's .whl/ folder (GPU_CHECK_WHEELS) and are
# installed into $PYTHON first. How to call it through the lent machine: docs/testing.md, "GPU tests on a GPU".
#
# The rehearsal without a GPU: ADCUDA_GPU_CHECK_EMULATED=1 builds with ADCUDA_CUDA=EMULATE (the kernels
# on the CPU emulator), runs the same steps (benchmarks run their reference checks and report
# "emulated: no timing"; the sanitizer steps run the workload under the emulator's reordered thread
# schedules instead) with a default budget of 1500 s. CI runs it on every change (.ci/run).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: [PYTHON=python3] $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
emulated=${ADCUDA_GPU_CHECK_EMULATED:-0}
[ "$emulated" = 0 ] && emulated=""
if [ -n "$emulated" ]; then budget=${GPU_CHECK_BUDGET:-1500}; else budget=${GPU_CHECK_BUDGET:-540}; fi
suites=${GPU_CHECK_BENCH_SUITES:-cuda_runtime,kernels,nn_kernels,gemm,attention,conv,rnn,gpt2_step,amp,cuda_graphs}
read -r -a test_args <<<"${GPU_CHECK_TESTS:-tests}"
wheels_dir=${GPU_CHECK_WHEELS:-$repo/.whl}
report="$repo/scripts/gpu_check_report.py"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
steps="$scratch/steps.tsv"  # name, status, seconds, detail: one line per step, the summary's source
: >"$steps"
for f in summary.md build.log info.txt bench.log bench.json pytest.log sanitizer.log; do rm -f "$out/$f"; done

log() { echo "[gpu_check $(date -u +%H:%M:%S) +${SECONDS}s] $*"; }
record() {  # record NAME STATUS SECONDS DETAIL
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//$'\n'/ }" >>"$steps"
  log "$2 $1 ($3 s)${4:+: $4}"
  write_summary
}
write_summary() {
  local mode="GPU"
  [ -n "$emulated" ] && mode="emulated (ADCUDA_CUDA=EMULATE, no GPU)"
  "$python" "$report" summary --steps "$steps" --out "$out" --mode "$mode" --budget "$budget" \
    --elapsed "$SECONDS" >"$out/summary.md.tmp" 2>>"$out/build.log" && mv "$out/summary.md.tmp" "$out/summary.md" \
    || { rm -f "$out/summary.md.tmp"; write_plain_summary; }
}
write_plain_summary() {  # when Python itself is unusable (the preflight says why)
  { echo "# adcuda gpu_check"; echo; echo "| step | status | seconds | detail |"; echo "|---|---|---|---|"
    while IFS=$'\t' read -r name status seconds detail; do echo "| $name | $status | $seconds | $detail |"; done <"$steps"
  } >"$out/summary.md"
}
finish() {
  local failed
  failed=$(awk -F'\t' '$2 != "OK" && $2 != "ok"' "$steps" | wc -l)
  local files
  files=$(find "$out" -mindepth 1 | wc -l)
  if [ "$files" -gt 8 ]; then
    record "output" FAILED 0 "OUTDIR holds $files entries; the lent machine returns at most 8 files"
    failed=$((failed + 1))
  fi
  log "done in ${SECONDS} s: $failed step(s) failed; summary in $out/summary.md"
  [ "$failed" -gt 0 ] && exit "$failed"
  exit 0
}

# Shares of the budget in seconds per 540 (GPU) or per 1500 (emulated), scaled to GPU_CHECK_BUDGET;
# on a GPU they add up to at most 540 with the default ten benchmark suites (bench is per suite).
# A step may run until only the shares of the steps after it are left.
declare -A share
if [ -n "$emulated" ]; then
  share_base=1500
  share=([build]=600 [info]=15 [bench]=30 [tests]=600 [memcheck]=45 [racecheck]=45 [synccheck]=45)
else
  share_base=540
  share=([build]=160 [info]=10 [bench]=20 [tests]=120 [memcheck]=20 [racecheck]=15 [synccheck]=15)
fi
IFS=',' read -r -a suite_list <<<"$suites"
[ "$suites" = "none" ] && suite_list=()
plan=(build info)
for suite in "${suite_list[@]}"; do plan+=("bench:$suite"); done
plan+=(tests memcheck racecheck synccheck)
share_of() { local key=${1%%:*}; echo $(( ${share[$key]} * budget / share_base )); }
# limit_for STEP: the seconds STEP may take now: what is left of the budget but the shares of the steps
# after it, and at least its own share while the budget holds it.
limit_for() {
  local later=0 seen="" step
  for step in "${plan[@]}"; do
    [ -n "$seen" ] && later=$((later + $(share_of "$step")))
    [ "$step" = "$1" ] && seen=1
  done
  local left=$((budget - SECONDS))
  local limit=$((left - later))
  local own
  own=$(share_of "$1")
  [ "$limit" -lt "$own" ] && limit=$own
  [ "$limit" -gt "$left" ] && limit=$left
  echo "$limit"
}
# timed LIMIT LOG COMMAND...: runs COMMAND from the scratch folder (so the source tree cannot shadow the
# installed package), output appended to LOG; sets $status (124: killed at the limit) and $took.
timed() {
  local limit=$1 logfile=$2
  shift 2
  local start=$SECONDS
  echo "== $(date -u +%H:%M:%S) (limit ${limit} s): $*" >>"$logfile"
  if [ "$limit" -lt 3 ]; then
    echo "not run: the ${budget} s budget is spent" >>"$logfile"
    status=124 took=0
    return
  fi
  (cd "$scratch" && timeout --kill-after=10 "$limit" "$@") >>"$logfile" 2>&1
  status=$?
  took=$((SECONDS - start))
  [ "$status" -eq 124 ] && echo "== killed after ${limit} s" >>"$logfile"
}

log "adcuda gpu_check into $out: python $python, budget ${budget} s${emulated:+, emulated}"

# ---- preflight -------------------------------------------------------------------------------------
shopt -s nullglob
wheels=("$wheels_dir"/*.whl)
shopt -u nullglob
if [ ${#wheels[@]} -gt 0 ]; then
  timed 60 "$out/build.log" "$python" -m pip install --no-index --no-deps --no-compile "${wheels[@]}"
  if [ "$status" -ne 0 ]; then
    record "preflight" FAILED "$took" "installing the carried wheels ${wheels[*]##*/} failed (build.log)"
    finish
  fi
fi
missing=()
if ! command -v "$python" >/dev/null 2>&1; then
  missing+=("the interpreter PYTHON=$python")
else
  # 60 s, not the ~5 s it takes: importing torch on a loaded machine (CI's 2 cores) can take 20 s
  probe=$(cd "$scratch" && timeout 60 "$python" -c '
import importlib, sys
missing = []
for name in ("numpy", "pybind11", "scikit_build_core", "pytest", "hypothesis", "tqdm", "nvtx", "torch"):
    try:
        importlib.import_module(name)
    except Exception as e:
        missing.append(f"python package {name} ({type(e).__name__}: {e})")
print("\n".join(missing))
print("xdist" if importlib.util.find_spec("xdist") else "", "timeout" if importlib.util.find_spec("pytest_timeout") else "")
' 2>&1) || missing+=("$python could not finish importing the packages it needs (exit $?): ${probe//$'\n'/ }")
  while IFS= read -r line; do
    case "$line" in "python package"*) missing+=("$line") ;; esac
  done <<<"$probe"
  plugins=$(tail -n 1 <<<"$probe")
fi
tool_versions=""
for tool in cmake ninja nvcc; do
  if version=$(timeout 5 "$tool" --version 2>/dev/null | grep -m1 -iE "version|release|^[0-9]"); then
    tool_versions+="$tool: ${version}; "
  else
    # cmake and ninja may come as Python packages, next to the interpreter
    if [ "$tool" != nvcc ] && version=$(timeout 5 "$(dirname "$(command -v "$python" || echo .)")/$tool" --version 2>/dev/null | head -n 1); then
      tool_versions+="$tool: ${version}; "
    else
      missing+=("$tool (not on PATH)")
    fi
  fi
done
arch=""
if [ -n "$emulated" ]; then
  gpu="none (emulated rehearsal)"
elif gpu=$(timeout 10 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1) \
    && [ -n "$gpu" ]; then
  cap=$(cut -d, -f2 <<<"$gpu" | tr -d ' ')
  arch=${cap/./}
  [[ "$arch" =~ ^[0-9]+$ ]] || missing+=("a compute capability from nvidia-smi (got '$cap')")
else
  missing+=("nvidia-smi or a visible GPU (${gpu:-no output})")
fi
echo "preflight: gpu: $gpu; ${tool_versions}pytest plugins: ${plugins:-none}" >>"$out/build.log"
if [ ${#missing[@]} -gt 0 ]; then
  record "preflight" FAILED "$SECONDS" "missing: $(IFS=';'; echo "${missing[*]}")"
  finish
fi
record "preflight" OK "$SECONDS" "gpu: $gpu; ${tool_versions}pytest plugins: ${plugins:-none}"

# ---- build -----------------------------------------------------------------------------------------
if [ -n "$emulated" ]; then
  build_env=(ADCUDA_CUDA=EMULATE)
  build_dir="$repo/build/gpu-check-emulated"
  what="ADCUDA_CUDA=EMULATE"
else
  # sm_90a on a 9.0 GPU (the wgmma/TMA GEMM needs the arch-specific features), as CMakeLists.txt chooses.
  code_arch=$arch
  [ "$arch" = 90 ] && code_arch=90a
  build_env=(ADCUDA_CUDA=ON "ADCUDA_CUDA_ARCHS=${code_arch}-real")
  build_dir="$repo/build/gpu-check-sm$arch"
  what="ADCUDA_CUDA=ON, sm_$arch machine code only"
fi
limit=$(limit_for build)
timed "$limit" "$out/build.log" env "${build_env[@]}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$python" -m pip install -v --no-build-isolation --no-deps --force-reinstall "$repo" -Cbuild-dir="$build_dir"
if [ "$status" -ne 0 ]; then
  record "build" FAILED "$took" "$what: exit status $status$([ "$status" -eq 124 ] && echo ", killed at the ${limit} s limit"); last lines in build.log"
  finish
fi
record "build" OK "$took" "$what"

# ---- info ------------------------------------------------------------------------------------------
limit=$(limit_for info)
timed "$limit" "$out/info.txt" "$python" -m adcuda info
info_status=$status
timed "$limit" "$out/info.txt" "$python" -c '
import adcuda, adcuda.cuda as c
built = adcuda._native.build_info()
print("gpu_check: cuda usable:", c.is_available(), "| reason:", c.unavailable_reason(), "| emulated:", bool(built.get("cuda_emulated")))
raise SystemExit(0 if c.is_available() else 3)'
if [ "$info_status" -ne 0 ] || [ "$status" -ne 0 ]; then
  reason=$(grep -m1 "^gpu_check: cuda usable" "$out/info.txt" || tail -n 1 "$out/info.txt")
  record "info" FAILED "$took" "adcuda cannot use the device, so every later step would skip: $reason"
  finish
fi
record "info" OK "$took" "$(grep -m1 -iE "^ *(running on|device|cuda)" "$out/info.txt" | head -c 200)"

# ---- benchmarks ------------------------------------------------------------------------------------
declare -A bench_script=([cuda_runtime]=bench_cuda_runtime.py [kernels]=bench_kernels.py
  [nn_kernels]=bench_nn_kernels.py [gemm]=bench_gemm.py [attention]=bench_attention.py [conv]=bench_conv.py [rnn]=bench_rnn.py
  [gpt2_step]=bench_gpt2_step.py [amp]=bench_amp.py [cuda_graphs]=bench_cuda_graphs.py)
declare -A bench_args=([amp]="--device cuda" [conv]="--device cuda" [rnn]="--device cuda")
for suite in "${suite_list[@]}"; do
  script=${bench_script[$suite]:-}
  if [ -z "$script" ] || [ ! -f "$repo/benchmarks/$script" ]; then
    record "bench:$suite" FAILED 0 "no such suite (known: ${!bench_script[*]})"
    continue
  fi
  limit=$(limit_for "bench:$suite")
  rm -f "$scratch/$suite.json"
  # shellcheck disable=SC2086 # bench_args holds words
  timed "$limit" "$out/bench.log" "$python" "$repo/benchmarks/$script" --quick ${bench_args[$suite]:-} --json "$scratch/$suite.json"
  verdict=$("$python" "$report" merge-bench --bench-json "$out/bench.json" --suite "$suite" --script "$script" \
    --status "$status" --seconds "$took" --result "$scratch/$suite.json" --log "$out/bench.log" 2>&1)
  case "$verdict" in
    OK*) record "bench:$suite" OK "$took" "${verdict#OK }" ;;
    *) record "bench:$suite" FAILED "$took" "${verdict#FAILED }" ;;
  esac
done

# ---- tests -----------------------------------------------------------------------------------------
# Tests that fill the device's memory (GPU_CHECK_SERIAL_TESTS, a -k expression: those whose names say
# out_of_memory) run alone after the others, which run in parallel (pytest-xdist): beside other
# workers on one GPU they would make each other run out of memory.
limit=$(limit_for tests)
tests_start=$SECONDS
serial=${GPU_CHECK_SERIAL_TESTS:-out_of_memory}
pytest_args=(-m cuda -q -rfEs -p no:cacheprovider -c "$repo/pyproject.toml" --rootdir "$repo")
[[ "$plugins" == *timeout* ]] && pytest_args+=(--timeout 120)
parallel=()
workers=$(nproc)
[ "$workers" -gt 8 ] && workers=8
[[ "$plugins" == *xdist* ]] && [ "$workers" -gt 1 ] && parallel=(-n "$workers")
for i in "${!test_args[@]}"; do
  case ${test_args[$i]} in tests*) test_args[$i]="$repo/${test_args[$i]}" ;; esac
done
timed "$limit" "$out/pytest.log" "$python" -P -m pytest "${pytest_args[@]}" "${parallel[@]}" -k "not ($serial)" \
  "${test_args[@]}"
parallel_status=$status
timed "$((limit - (SECONDS - tests_start)))" "$out/pytest.log" "$python" -P -m pytest "${pytest_args[@]}" \
  -k "$serial" "${test_args[@]}"
took=$((SECONDS - tests_start))
verdict=$("$python" "$report" pytest-verdict --log "$out/pytest.log" --status "$parallel_status" --status "$status" 2>&1)
case "$verdict" in
  OK*) record "tests" OK "$took" "${verdict#OK }" ;;
  *) record "tests" FAILED "$took" "${verdict#FAILED }" ;;
esac

# ---- compute-sanitizer -----------------------------------------------------------------------------
workload=("$python" "$repo/scripts/cuda_runtime_workload.py")
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
declare -A schedule=([memcheck]=in-order [racecheck]=reverse [synccheck]=random:7)
for tool in memcheck racecheck synccheck; do
  limit=$(limit_for "$tool")
  if [ -n "$emulated" ]; then
    # No compute-sanitizer for the emulator: the workload under its thread schedules instead (a result
    # that changes with the schedule is a missing barrier).
    how="emulated stand-in: the workload with ADCUDA_EMULATOR_SCHEDULE=${schedule[$tool]}"
    if [ "${schedule[$tool]}" = in-order ]; then
      timed "$limit" "$out/sanitizer.log" env -u ADCUDA_EMULATOR_SCHEDULE "${workload[@]}"
    else
      timed "$limit" "$out/sanitizer.log" env "ADCUDA_EMULATOR_SCHEDULE=${schedule[$tool]}" "${workload[@]}"
    fi
  elif [ -z "$sanitizer" ]; then
    record "$tool" FAILED 0 "compute-sanitizer is not on PATH nor under /usr/local/cuda*/bin"
    continue
  else
    how="compute-sanitizer --tool $tool"
    timed "$limit" "$out/sanitizer.log" "$sanitizer" --tool "$tool" --error-exitcode 3 --print-limit 20 "${workload[@]}"
  fi
  verdict=$("$python" "$report" sanitizer-verdict --log "$out/sanitizer.log" --status "$status" 2>&1)
  case "$verdict" in
    OK*) record "$tool" OK "$took" "$how: ${verdict#OK }" ;;
    *) record "$tool" FAILED "$took" "$how: ${verdict#FAILED }" ;;
  esac
done

finish
