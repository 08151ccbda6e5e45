#!/usr/bin/env bash
# The GPU path checked on a machine with a GPU, from the working tree alone,
# in one command that ends within its time budget (default 450 s) whatever
# hangs: unpacks the Debian packages carried in .devdeps/ (what the machine
# lacks: NLopt, SQLite headers, libpq, prometheus-cpp) into a private prefix,
# builds hvdtune with the NCCL backend and the Python binding for the python3
# that has torch, runs the C++ NCCL suite and the torch CUDA tests (1 rank:
# NCCL; 2 ranks on one GPU: staged through host memory unless NCCL >= 2.30
# lets them share it), both again on the Gloo engine (the NCCL unique ids
# through its rendezvous store, no MPI in the runtimes), the busbw benchmark
# against raw ncclAllReduce (1 KiB - 1 GiB) and a short autotuned training
# on CUDA tensors (tools/device_train.py). Every step has its own timeout
# and a failure never stops the later steps. Writes one results file
# (--out, default $OUT/device_results.txt, else /tmp/device_results.txt),
# rewritten after every step, with the versions, every suite's counts, the
# busbw table, the training's frozen line and what could not run.
#
# --dry-run runs the same steps where there is no GPU (to check the script,
# the carried packages and the build before GPU time is spent): the GPU
# cases skip and say so. Docs: docs/testing.md ("The GPU check").
#
# Usage: tools/device_check.sh [--dry-run] [--out FILE] [--deps DIR]
#          [--build DIR] [--prefix DIR] [--budget SECONDS] [--jobs N]
#          [--python PYTHON] [--only STEPS]
# (--build and --prefix default to a new temporary directory; give both to
# rebuild only what changed on a second run. --only nccl_tests,pytest_cuda,
# nccl_tests_gloo,pytest_cuda_gloo,busbw,train runs those steps alone after
# the build. In a dry run every step may take 10 times as long, within the
# budget.)
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dry=0
out=""
deps="$root/.devdeps"
build=""
budget=450
jobs=$(nproc)
py=""
prefix=""
only=""
while (($#)); do
  case $1 in
    --dry-run) dry=1 ;;
    --out) out=$2; shift ;;
    --deps) deps=$2; shift ;;
    --build) build=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    --only) only=$2; shift ;;
    --budget) budget=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --python) py=$2; shift ;;
    -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "device_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ $budget =~ ^[0-9]+$ && $jobs =~ ^[0-9]+$ ]]; then
  echo "device_check.sh: --budget and --jobs take whole numbers" >&2
  exit 2
fi
out=$(realpath -m "${out:-${OUT:-/tmp}/device_results.txt}")
mkdir -p "$(dirname "$out")"
work=$(mktemp -d /tmp/hvdtune-device.XXXXXX)
build=$(realpath -m "${build:-$work/build}")
logs=$work/logs
prefix=$(realpath -m "${prefix:-$work/prefix}")
logcopy=$(dirname "$out")/device_check_logs
mkdir -p "$logs" "$prefix"
start=$(date +%s)
deadline=$((start + budget))

sections=()  # "title|file" pairs copied into the results file
status=()    # one line per step
cannot=()    # what could not run, and why

say() { echo "[device_check $(($(date +%s) - start))s] $*" >&2; }
could_not() { cannot+=("$*"); say "could not run: $*"; }

write_results() {
  {
    echo "# hvdtune device check ($([ $dry = 1 ] && echo dry run || echo GPU run))"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(($(date +%s) - start)) s of a ${budget} s budget"
    echo "working tree: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'no git')"
    echo
    echo "## Steps"
    printf '%s\n' "${status[@]}"
    local s title file
    for s in "${sections[@]}"; do
      title=${s%%|*}
      file=${s#*|}
      echo
      echo "## $title"
      cat "$file" 2>/dev/null
    done
    echo
    echo "## Could not run"
    if ((${#cannot[@]})); then printf -- '- %s\n' "${cannot[@]}"; else echo "- (nothing)"; fi
    echo
    echo "Logs: $logcopy (and $logs)"
  } >"$out"
  # The logs beside the results file, so that they come back with it.
  mkdir -p "$logcopy" && cp -f "$logs"/*.log "$logcopy"/ 2>/dev/null
}

# step NAME MAX_SECONDS CMD...: runs CMD with a timeout of MAX_SECONDS or
# what is left of the budget (less 20 s for the results), whichever is less;
# output in $logs/NAME.log. Returns CMD's status (124/137: timed out, 125:
# no time left, 126: left out by --only).
step() {
  local name=$1 max=$2
  shift 2
  case $name in deps | configure | build) ;; *)
    if [ -n "$only" ] && [[ ",$only," != *",${name%_np*},"* ]]; then
      status+=("- $name: left out (--only $only)")
      return 126
    fi ;;
  esac
  ((dry)) && max=$((max * 10))
  local t=$((deadline - $(date +%s) - 20))
  ((t > max)) && t=$max
  if ((t < 5)); then
    status+=("- $name: not run (no time left in the budget)")
    could_not "$name: no time left in the ${budget} s budget"
    write_results
    return 125
  fi
  say "$name (timeout ${t} s)"
  local t0=$SECONDS rc
  timeout -k 5 "$t" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  if ((rc == 124 || rc == 137)); then
    status+=("- $name: TIMED OUT after ${t} s")
    could_not "$name: timed out after ${t} s (log: $logs/$name.log)"
  else
    status+=("- $name: exit $rc in $((SECONDS - t0)) s")
  fi
  write_results
  return $rc
}

# Appends a section holding the given text.
section() {
  local f=$work/section_${#sections[@]}.txt
  printf '%s\n' "$2" >"$f"
  sections+=("$1|$f")
  write_results
}

# GoogleTest counts of a log (summed over the ranks that printed them).
gtest_counts() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '/^\[  PASSED  \] [0-9]+ test/ {p += $4}
       /^\[  SKIPPED \] [0-9]+ test/ {s += $4}
       /^\[  FAILED  \] [0-9]+ test/ {f += $4}
       END {printf "passed %d, skipped %d, failed %d (as the ranks printed them)", p, s, f}'
}

# pytest's summary lines ("N passed, M skipped in T s"), one per rank.
pytest_counts() {
  grep -E '[0-9]+ (passed|failed|skipped|error)' "$1" | grep -E ' in [0-9.]+s' |
    sed -e 's/\x1b\[[0-9;]*m//g' -e 's/=//g' -e 's/^ *//' | paste -sd';' -
}

# A pytest log's lines matching a pattern (FAILED, SKIPPED), colours
# stripped, each once, indented; at most N (default 10).
pytest_lines() {
  grep -E "$2" "$1" | sed 's/\x1b\[[0-9;]*m//g' | sort -u | head -"${3:-10}" | sed 's/^/  /'
}

mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none
     --mca btl "self,vader,tcp")

# -- the machine ---------------------------------------------------------------
if [ -z "$py" ]; then
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null &&
       "$candidate" -c 'import torch' >/dev/null 2>&1; then
      py=$(command -v "$candidate")
      break
    fi
  done
fi
info=$(
  echo "host: $(uname -srm), $(nproc) cores, $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  if command -v nvidia-smi >/dev/null; then
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | paste -sd';' -)"
  else
    echo "gpu: none (no nvidia-smi)"
  fi
  echo "nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' || echo none)"
  echo "compiler: $(c++ --version 2>/dev/null | head -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1)"
  if [ -n "$py" ]; then
    echo "python: $py, $("$py" -c 'import sys, torch; print("Python %s, torch %s (CUDA %s, its NCCL %s), cuda available: %s, devices: %d" % (sys.version.split()[0], torch.__version__, torch.version.cuda, ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-", torch.cuda.is_available(), torch.cuda.device_count()))' 2>&1 | tail -1)"
  else
    echo "python: none with torch"
  fi
  echo "mpirun: $(mpirun --version 2>/dev/null | head -1)"
)
section "Machine" "$info"
[ -n "$py" ] || could_not "the Python steps: no python3 with torch"

# -- carried packages into a private prefix --------------------------------------
unpack() {
  local d n=0
  for d in "$deps"/*.deb; do
    [ -e "$d" ] || continue
    dpkg -x "$d" "$prefix" || return 1
    n=$((n + 1))
  done
  echo "unpacked $n packages from $deps into $prefix"
  # The .pc files name /usr: point them at the prefix (Requires.private
  # would ask pkg-config for packages only static linking needs).
  find "$prefix" -name '*.pc' -exec sed -i -e "s|^prefix=/usr\$|prefix=$prefix/usr|" \
    -e "s|=/usr/|=$prefix/usr/|g" -e '/^Requires.private/d' {} +
  # Gloo's CMake package names its library by an absolute /usr path.
  if [ -d "$prefix/usr/share/cmake/Gloo" ]; then
    find "$prefix/usr/share/cmake/Gloo" -name '*.cmake' \
      -exec sed -i "s|\"/usr/lib/|\"$prefix/usr/lib/|g" {} +
  fi
  # A library the machine has itself (zlib, SQLite, curl: newer there) is
  # linked and loaded from the machine: the carried copy goes, and its
  # development symlink points at the machine's.
  local f soname sys base
  while read -r f; do
    soname=$(objdump -p "$f" 2>/dev/null | awk '/SONAME/ {print $2}')
    case $soname in libz.so.1 | libsqlite3.so.0 | libcurl.so.4) ;; *) continue ;; esac
    sys=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ {print $NF; exit}')
    [ -n "$sys" ] || continue
    base=${soname%%.so*}.so
    find "$prefix" -name "$soname*" -exec rm -f {} +
    find "$prefix" -name "$base" -exec ln -sf "$sys" {} \;
    echo "$soname: the machine's $sys"
  done < <(find "$prefix" -name 'lib*.so.*' -type f)
  # What the carried libraries need that neither the machine nor the prefix
  # has (the link would fail on it).
  local missing
  missing=$(find "$prefix" -name 'lib*.so.*' -type f -exec env \
    LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu" \
    ldd {} \; 2>/dev/null | grep 'not found' | sort -u)
  if [ -n "$missing" ]; then
    echo "missing on this machine:"
    echo "$missing"
  else
    echo "every library the carried ones need is there"
  fi
}
# (Debian installs libgloo in usr/lib, outside the multiarch directory.)
libdirs="$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:$prefix/usr/lib"
export deps prefix
if step deps 60 bash -c "$(declare -f unpack); unpack"; then
  section "Carried packages" "$(cat "$logs/deps.log")"
else
  could_not "unpacking the carried packages (log: $logs/deps.log)"
fi
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LIBRARY_PATH="$libdirs${LIBRARY_PATH:+:$LIBRARY_PATH}"
export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# CUDA's host compiler, if the environment names one that is not there.
if [ -n "${CUDAHOSTCXX:-}" ] && ! [ -x "$CUDAHOSTCXX" ]; then unset CUDAHOSTCXX; fi

# -- configure and build ------------------------------------------------------------
cuda_opt=ON
[ $dry = 1 ] && cuda_opt=AUTO
cmake_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
  -DHVDTUNE_WITH_CUDA="$cuda_opt" -DCMAKE_PREFIX_PATH="$prefix/usr")
command -v ninja >/dev/null && cmake_args+=(-G Ninja)
if [ -n "$py" ]; then
  cmake_args+=(-DPython3_EXECUTABLE="$py" -DHVDTUNE_WITH_PYTHON=ON)
  pybind=$("$py" -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null) &&
    cmake_args+=(-Dpybind11_DIR="$pybind")
  # The torch.distributed backend builds against that python's torch (its
  # TorchConfig.cmake), a separate step: a failure there keeps the rest.
  torch_cmake=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null) &&
    cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix/usr;$torch_cmake")  # the last -D wins
fi
built=0
# A fresh configure: the prefix is new on every run (the objects are kept).
rm -f "$build/CMakeCache.txt"
if step configure 120 cmake "${cmake_args[@]}"; then
  summary=$(grep -E 'hvdtune:' "$logs/configure.log")
  # Where the carried dependencies were found.
  summary+=$'\n'$(grep -E '^(pkgcfg_lib_NLOPT_nlopt|pkgcfg_lib_LIBPQ_pq|SQLite3_LIBRARY|SQLite3_INCLUDE_DIR|prometheus-cpp_DIR|civetweb_DIR|NCCL_LIBRARY|NCCL_INCLUDE_DIR|Python3_EXECUTABLE):' \
    "$build/CMakeCache.txt" | sed 's/:[A-Z]*=/ = /')
  section "Configure" "$summary"
  targets=(nccl_tests)
  grep -q 'NCCL backend 1' "$logs/configure.log" && targets+=(nccl_busbw)
  grep -q 'Python binding 1' "$logs/configure.log" && targets+=(hvdtune_python_core)
  gloo=0
  grep -q 'Gloo engine 1' "$logs/configure.log" && gloo=1 && targets+=(hvd-tune)
  step build 240 cmake --build "$build" -j "$jobs" --target "${targets[@]}"
  rc=$?
  if ((rc == 0)); then
    built=1
  else
    ((rc == 124 || rc == 137)) ||
      section "Build errors" "$(grep -E -B2 -A3 'error' "$logs/build.log" | head -40)"
    could_not "everything after the build: the NCCL suite, the torch CUDA tests, busbw, the training (log: $logs/build.log)"
  fi
else
  section "Configure errors" "$(tail -30 "$logs/configure.log")"
  could_not "everything after configure (log: $logs/configure.log)"
fi

# -- NCCL version: several ranks on one GPU? -------------------------------------
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
nccl_code=0
if [ $built = 1 ] && [ -n "$py" ] && [ -e "$build/python/hvdtune" ]; then
  nccl_code=$("$py" -c 'from hvdtune import _core; print(_core.nccl_version())' 2>/dev/null || echo 0)
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
multi=0
if ((nccl_code >= 23000)); then
  multi=1
  export NCCL_MULTI_RANK_GPU_ENABLE=1
  note="NCCL $nccl_code >= 2.30: 2 ranks share a GPU with NCCL_MULTI_RANK_GPU_ENABLE=1"
else
  note="NCCL version code $nccl_code (the library hvdtune loads): below 2.30 (23000), so 2 ranks cannot share one GPU on NCCL; the 2-rank runs exercise the host-staging path for CUDA tensors, and busbw runs at 1 rank"
  ((ngpu > 1)) && note+=" (or on $ngpu GPUs, one per rank)"
fi
section "NCCL" "$note"

# -- the C++ NCCL suite -------------------------------------------------------------
suites=""
if [ $built = 1 ]; then
  for np in 1 2; do
    step "nccl_tests_np$np" 90 "${mpi[@]}" -np "$np" "$build/tests/nccl_tests"
    rc=$?
    ((rc == 126)) && continue
    line="nccl_tests, $np rank(s): $(gtest_counts "$logs/nccl_tests_np$np.log") (exit $rc)"
    skip=$(grep -m1 -A1 'Skipped' "$logs/nccl_tests_np$np.log" | grep -v Skipped | head -1)
    [ -n "$skip" ] && line+=$'\n'"  skip reason: $skip"
    suites+="$line"$'\n'
  done
fi

# -- the torch CUDA tests ---------------------------------------------------------------
if [ $built = 1 ] && [ -n "$py" ]; then
  for np in 1 2; do
    step "pytest_cuda_np$np" 150 "${mpi[@]}" -np "$np" "$py" -m pytest -q -rfEs \
      -p no:cacheprovider "$root/python/tests/test_torch_cuda.py"
    rc=$?
    ((rc == 126)) && continue
    suites+="test_torch_cuda.py, $np rank(s): $(pytest_counts "$logs/pytest_cuda_np$np.log") (exit $rc)"$'\n'
    reasons=$(pytest_lines "$logs/pytest_cuda_np$np.log" '^SKIPPED|SKIPPED \[' 5)
    [ -n "$reasons" ] && suites+="$reasons"$'\n'
    failures=$(pytest_lines "$logs/pytest_cuda_np$np.log" '^FAILED')
    [ -n "$failures" ] && suites+="$failures"$'\n'
  done
fi
# -- the same on the Gloo engine: no MPI in the runtimes, the NCCL unique ids
# through the rendezvous store (the C++ suite: mpirun starts the ranks and
# rank 0 serves the store, mpi_main.cc; the torch tests: hvd-tune run --gloo).
if [ $built = 1 ] && [ "${gloo:-0}" = 1 ]; then
  for np in 1 2; do
    step "nccl_tests_gloo_np$np" 90 env HVDTUNE_TEST_ENGINE=gloo HVDTUNE_TEST_GLOO_IFACE=lo \
      "${mpi[@]}" -np "$np" "$build/tests/nccl_tests"
    rc=$?
    ((rc == 126)) && continue
    suites+="nccl_tests on the Gloo engine, $np rank(s): $(gtest_counts "$logs/nccl_tests_gloo_np$np.log") (exit $rc)"$'\n'
  done
  if [ -n "$py" ]; then
    for np in 1 2; do
      step "pytest_cuda_gloo_np$np" 150 "$build/tools/hvd_tune/hvd-tune" run --gloo \
        --network-interface lo -np "$np" -- "$py" -m pytest -q -rfEs -p no:cacheprovider \
        "$root/python/tests/test_torch_cuda.py"
      rc=$?
      ((rc == 126)) && continue
      suites+="test_torch_cuda.py on the Gloo engine, $np rank(s): $(pytest_counts "$logs/pytest_cuda_gloo_np$np.log") (exit $rc)"$'\n'
      failures=$(pytest_lines "$logs/pytest_cuda_gloo_np$np.log" '^FAILED')
      [ -n "$failures" ] && suites+="$failures"$'\n'
    done
  fi
elif [ $built = 1 ]; then
  could_not "the Gloo engine's runs: configured without Gloo (carry libgloo-dev's packages in $deps)"
fi
[ -n "$suites" ] && section "Suites" "$suites"

# -- the torch.distributed backend against the torch found ---------------------
if [ $built = 1 ] && grep -q 'torch.distributed backend 1' "$logs/configure.log"; then
  c10d=""
  if step c10d_build 300 cmake --build "$build" -j "$jobs" --target hvdtune_python_c10d; then
    torch_v=$("$py" -c 'import torch.distributed; from hvdtune import _c10d; print(_c10d.torch_version)' 2>&1 | tail -1)
    c10d+="hvdtune._c10d built against torch $torch_v"$'\n'
    for np in 1 2; do
      step "pytest_c10d_np$np" 150 "${mpi[@]}" -np "$np" "$py" -m pytest -q -rfEs \
        -p no:cacheprovider "$root/python/tests/test_c10d.py"
      rc=$?
      ((rc == 126)) && continue
      c10d+="test_c10d.py, $np rank(s): $(pytest_counts "$logs/pytest_c10d_np$np.log") (exit $rc)"$'\n'
      failures=$(pytest_lines "$logs/pytest_c10d_np$np.log" '^FAILED')
      [ -n "$failures" ] && c10d+="$failures"$'\n'
    done
    for mode in ddp zero; do
      args=()
      [ $mode = zero ] && args=(--zero)
      step "c10d_${mode}_np2" 150 env PYTHONPATH="$root/python/tests:$PYTHONPATH" \
        "${mpi[@]}" -np 2 "$py" "$root/python/tests/c10d_ddp_train.py" "${args[@]}"
      rc=$?
      ((rc == 126)) && continue
      c10d+="c10d_ddp_train.py ${args[*]}, 2 ranks (exit $rc): $(grep -iE 'diff|differ|match' "$logs/c10d_${mode}_np2.log" | tail -2 | paste -sd';' -)"$'\n'
    done
  else
    c10d+="hvdtune._c10d did not build against this torch:"$'\n'
    c10d+="$(grep -E 'error' "$logs/c10d_build.log" | head -30)"$'\n'
    could_not "the torch.distributed backend's tests: it did not build (log: $logs/c10d_build.log)"
  fi
  section "torch.distributed backend" "$c10d"
elif [ $built = 1 ] && [ -n "$py" ]; then
  could_not "the torch.distributed backend: configured without it ($(grep -m1 -iE 'torch' "$logs/configure.log"))"
fi

# -- busbw against raw NCCL -----------------------------------------------------------
if [ $built = 1 ] && [ -x "$build/bench/nccl_busbw" ]; then
  nps=(1)
  ((multi || ngpu > 1)) && nps+=(2)
  for np in "${nps[@]}"; do
    step "busbw_np$np" 150 "${mpi[@]}" -np "$np" "$build/bench/nccl_busbw" \
      --min-bytes 1K --max-bytes 1G --step-factor 4 --repeats 5
    rc=$?
    ((rc == 126)) && continue
    if ((rc == 77)); then
      could_not "busbw at $np rank(s): $(grep -m1 'could not run' "$logs/busbw_np$np.log")"
    fi
    section "busbw, $np rank(s) (exit $rc)" "$(grep -E '^(#|nccl_busbw|  +[0-9.]+ (B|KiB|MiB|GiB) )' "$logs/busbw_np$np.log")"
  done
elif [ $built = 1 ]; then
  could_not "busbw: no nccl_busbw (this build has no NCCL backend)"
fi

# -- autotuned training on CUDA tensors --------------------------------------------------
# tools/device_train.py allreduces the gradients also on one rank (where
# DistributedOptimizer, as Horovod's, reduces nothing), so that the 1-rank
# run trains on NCCL while the tuner explores.
if [ $built = 1 ] && [ -n "$py" ]; then
  for np in 1 2; do
    step "train_np$np" 120 env HOROVOD_AUTOTUNE=1 HOROVOD_AUTOTUNE_WARMUP_SAMPLES=1 \
      HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE=3 HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=8 \
      HVDTUNE_AUTOTUNE_SAMPLE_PRECISION=0 HVDTUNE_AUTOTUNE_RETUNE_DROP=0 \
      HVDTUNE_AUTOTUNE_STORE=off HOROVOD_AUTOTUNE_LOG="$work/autotune_np$np.csv" \
      "${mpi[@]}" -np "$np" "$py" "$root/tools/device_train.py" \
      --model resnet18 --batch-size 32 --image-size 64 --max-seconds 75
    rc=$?
    ((rc == 126)) && continue
    log=$logs/train_np$np.log
    section "Training, $np rank(s), HOROVOD_AUTOTUNE=1 (exit $rc)" "$(
      grep -E '^device_train:|autotune: ' "$log" | head -8
      [ -f "$work/autotune_np$np.csv" ] && echo "samples logged: $(($(wc -l <"$work/autotune_np$np.csv") - 1))"
      grep -m3 -E 'Error|error:' "$log")"
    grep -q 'autotune: frozen' "$log" || could_not "training at $np rank(s) did not show a frozen autotune line (log: $log)"
  done
fi

status+=("- total: $(($(date +%s) - start)) s")
write_results
say "results in $out"
cat "$out"
