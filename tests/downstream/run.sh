#!/usr/bin/env bash
# Installs the build into a scratch prefix, then configures, builds and runs
# a downstream project against it with find_package(hvdtune).
set -euo pipefail
build=$1; here=$(cd "$(dirname "$0")" && pwd); mpirun=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$work/build/downstream"
