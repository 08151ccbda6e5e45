#!/usr/bin/env bash
# Installs the Debian 12 packages hvdtune needs, only those missing.
# Idempotent and non-interactive; run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  g++ make cmake pkg-config git ca-certificates
  openmpi-bin libopenmpi-dev
  # The Gloo engine (HOROVOD_GLOO=1, hvd-tune run --gloo).
  libgloo-dev
  libeigen3-dev libnlopt-dev libnlopt-cxx-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev
  prometheus-cpp-dev prometheus nodejs python3-yaml
  libsqlite3-dev
  # The PostgreSQL store backend (libpq) and the server its tests start.
  libpq-dev
  postgresql-15
  # The Python binding (python/) and its tests, for /usr/bin/python3.
  python3-dev pybind11-dev python3-numpy python3-pytest
  python3-torch python3-torchvision python3-sklearn
  # clang and its fuzzer and AddressSanitizer runtimes: the import parser's
  # libFuzzer test; librsvg2-bin: hvd-tune plot --png
  clang libclang-rt-14-dev librsvg2-bin
  # The emulated cluster (ip, tc: tools/cluster.sh) and the process tools the
  # scripts and tests call (ps, pgrep, pkill, sysctl; fuser, killall).
  iproute2 procps psmisc
  # The Gloo engine and the torch.distributed backend build on these.
  libgloo-dev libtorch-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

# npm comes with NodeSource's nodejs; Debian's nodejs needs the npm package.
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The dashboard's schema check: @grafana/schema and typescript from npm into
# dashboard/check/node_modules (git-ignored), only when missing.
"$(dirname "$0")/../dashboard/check/install.sh"
