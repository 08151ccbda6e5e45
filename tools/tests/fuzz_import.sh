#!/usr/bin/env bash
# Builds the import parser's libFuzzer target with clang (Debian's clang
# package; tools/setup.sh installs it) and runs it for a bounded time on a
# seed corpus that holds a real export of the test store.
#   fuzz_import.sh CLANGXX OUT_DIR SECONDS SOURCE_DIR HVD_TUNE STORE LIBS...
set -euo pipefail
cxx=$1 out=$2 seconds=$3 src=$4 hvd_tune=$5 store=$6
shift 6
mkdir -p "$out/corpus"
bin=$out/import_fuzz
sources=("$src/tools/tests/import_fuzz.cc" "$src/tools/hvd_tune/exchange.cc"
  "$src/tools/hvd_tune/common.cc")
# Rebuilt only when a source or a library changed (it takes a minute here).
stale=0
[[ -x $bin ]] || stale=1
for f in "${sources[@]}" "$src/tools/hvd_tune/exchange.h" \
  "$src/tools/hvd_tune/common.h" "$@"; do
  [[ -f $f && $f -nt $bin ]] && stale=1
done
if ((stale)); then
  # The runtime's static libraries were built by the project's compiler;
  # only the parser and the fuzz driver are instrumented.
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$src/tools/hvd_tune" \
    -I"$src/runtime/include" -I"$src/store/include" "${sources[@]}" "$@" \
    $(mpicc --showme:link) -lpthread -o "$bin"
fi
"$hvd_tune" export --db "$store" -o "$out/corpus/export.json"
# A crash leaves its input in $out/crash-*; its last lines say which.
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$out/" "$out/corpus" 2>&1 | tail -n 12
echo "import fuzzer: no crash in $seconds s"
