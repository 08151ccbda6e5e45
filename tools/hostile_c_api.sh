#!/usr/bin/env bash
# Hostile-input run of the C API under AddressSanitizer + UndefinedBehavior-
# Sanitizer: builds c_api_test and mpi_faults_tests into a separate build
# directory (build-asan/, or $HVDTUNE_ASAN_BUILD_DIR) and runs them under
# mpirun on 1, 2 and 3 ranks, with a long hostile sweep. Any sanitizer
# report stops the process with a non-zero exit, which fails the script.
# Usage: tools/hostile_c_api.sh [--quick] [sweep iterations, default 3000]
# Slow (a sanitized build of the whole runtime); not part of tools/test.sh.
# --quick sanitizes only the C API layer (c_api.cc, runtime.cc: the argument
# checks and size arithmetic) and c_api_test.c, linked with the normal
# build's library from build/ (ASan still intercepts malloc/free/memcpy
# everywhere); it runs c_api_test only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HVDTUNE_ASAN_BUILD_DIR:-$root/build-asan}
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
iterations=${1:-3000}
jobs=${HVDTUNE_JOBS:-$(nproc)}
# Open MPI's own allocations at exit are not ours to report (detect_leaks=0).
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=23
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ "$quick" = 1 ]; then
  normal=${HVDTUNE_BUILD_DIR:-$root/build}
  cmake --build "$normal" -j "$jobs" --target hvdtune_runtime
  out=$build-quick
  mkdir -p "$out"
  inc=(-I"$root/runtime/include" -I"$root/runtime/src" -I"$normal/runtime/generated"
    -I"$root/tuner/include" $(mpicxx --showme:compile))
  for f in root/c_api core/runtime; do
    c++ -std=c++20 -O1 $flags -DOMPI_SKIP_MPICXX=1 "${inc[@]}" \
      -c "$root/runtime/src/$f.cc" -o "$out/${f#*/}.o" &
  done
  cc -std=c11 -O1 $flags -I"$root/runtime/include" -c "$root/tests/c_api_test.c" \
    -o "$out/c_api_test.o" &
  wait
  # The sanitized objects come first, so the libraries' own copies of these
  # two files are never pulled in (static libraries of the normal build).
  c++ -fsanitize=address,undefined "$out/c_api_test.o" "$out/c_api.o" \
    "$out/runtime.o" "$normal/runtime/libhvdtune.a" \
    "$normal/runtime/libhvdtune_core.a" "$normal/metrics/libhvdtune_metrics.a" \
    "$normal/timeline/libhvdtune_timeline.a" "$normal/store/libhvdtune_store.a" \
    "$normal/runtime/libhvdtune_api.a" "$normal/tuner/libhvdtune_tuner.a" \
    $(mpicxx --showme:link) -lnlopt -lprometheus-cpp-pull -lprometheus-cpp-core \
    -lsqlite3 -lpq -lz \
    $(grep -o '/[^ ]*lib\(cudart\|nccl\)\.so' "$normal/tests/CMakeFiles/c_api_test.dir/link.txt" || true) \
    -o "$out/c_api_test"
  status=0
  for np in 1 2 3; do
    echo "== (quick) c_api_test --hostile $iterations, $np ranks"
    "$root/tools/mpirun.sh" -x ASAN_OPTIONS -x UBSAN_OPTIONS -np "$np" \
      "$out/c_api_test" --hostile "$iterations" || status=1
  done
  if [ "$status" = 0 ]; then echo "hostile C API run (quick): clean"; else echo "hostile C API run (quick): FAILED"; fi
  exit "$status"
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  "${launcher[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" --target c_api_test mpi_faults_tests
mpirun=("$root/tools/mpirun.sh" -x ASAN_OPTIONS -x UBSAN_OPTIONS)
status=0
for np in 1 2 3; do
  echo "== c_api_test --hostile $iterations, $np ranks"
  "${mpirun[@]}" -np "$np" "$build/tests/c_api_test" --hostile "$iterations" || status=1
done
for np in 1 2; do
  echo "== mpi_faults_tests, $np ranks"
  "${mpirun[@]}" -np "$np" "$build/tests/mpi_faults_tests" || status=1
done
echo "== init with HVDTUNE_RANKS_PER_NODE on rank 1 only"
"${mpirun[@]}" -np 1 "$build/tests/c_api_test" --expect-init-error \
  "HVDTUNE_RANKS_PER_NODE differs" : \
  -np 1 -x HVDTUNE_RANKS_PER_NODE=1 "$build/tests/c_api_test" \
  --expect-init-error "HVDTUNE_RANKS_PER_NODE differs" || status=1
if [ "$status" = 0 ]; then echo "hostile C API run: clean"; else echo "hostile C API run: FAILED"; fi
exit "$status"
