#!/usr/bin/env bash
# Installs the build into a scratch prefix, then configures, builds and runs
# a downstream project against it with find_package(hvdtune): its own
# program, then every C and C++ example of the manual marked compiles.
set -euo pipefail
build=$1; here=$(cd "$(dirname "$0")" && pwd); mpirun=$2
source=$(cd "$here/../.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
python3 "$source/tools/run_doc_blocks.py" --source "$source" \
  --extract-examples "$work/examples"
cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DHVDTUNE_DOC_EXAMPLES="$work/examples" >/dev/null
cmake --build "$work/build" >/dev/null
run() { "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$@"; }
run "$work/build/downstream"
for example in "$work"/build/doc_example_*; do
  [ -x "$example" ] || continue
  echo "running $(head -1 "$work/examples/$(basename "$example")".c* | sed 's|^// ||')"
  run "$example"
done
