#!/usr/bin/env bash
# Runs the `cuda`-marked tests without a GPU, on the CUDA emulator (kernels/emulator):
#
#     scripts/emulated_cuda_tests.sh [PYTEST ARGS...]
#
# builds adcuda with ADCUDA_CUDA=EMULATE (every .cu file compiled as host C++ against the emulator; only
# the CUDA headers are needed, from nvcc's toolkit) into its own build folder and virtual environment
# (its own: an editable install elsewhere must not shadow it), then runs `pytest -m cuda` on it; extra arguments go to pytest
# (default: the whole tests/ folder). What passes here has run every kernel's code path on the CPU, with
# real barriers between the emulated threads and real concurrency between streams; it says nothing about
# speed, and it is not a GPU: say "emulated", never "ran on a GPU".
#
# ADCUDA_EMULATOR_SCHEDULE=reverse|random[:seed] reorders the emulated threads (a result that changes
# is a missing barrier); EMULATED_VENV and EMULATED_BUILD_DIR move the venv and build folder.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
venv=${EMULATED_VENV:-$repo/build/emulated-venv}
build_dir=${EMULATED_BUILD_DIR:-build/emulated}

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja
fi
echo "== building adcuda with ADCUDA_CUDA=EMULATE into $build_dir (incremental after the first time)"
(cd "$repo" && ADCUDA_CUDA=EMULATE "$venv/bin/python" -m pip install --quiet --no-build-isolation ".[test]" \
  -Cbuild-dir="$build_dir")

# Test paths given relative to where this was started, made absolute before leaving.
args=()
paths=0
for arg in "$@"; do
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then
    args+=("$(cd "$(dirname "${arg%%::*}")" && pwd)/$(basename "$arg")")
    paths=$((paths + 1))
  else
    args+=("$arg")
  fi
done
[ "$paths" -eq 0 ] && args+=("$repo/tests")
set -- "${args[@]}"

# From outside the checkout, so that `import adcuda` finds the installed (emulated) build, not the
# source tree, which has no native module.
cd "$(mktemp -d)"
"$venv/bin/python" -c "import adcuda, adcuda.cuda as c; assert adcuda._native.build_info().get('cuda_emulated'), 'not the emulated build: ' + adcuda.__file__; print('device:', c.get_device_name(0))"
exec "$venv/bin/python" -m pytest -c "$repo/pyproject.toml" --rootdir "$repo" -p no:cacheprovider -m cuda "$@"
