#!/usr/bin/env bash
# mpirun with the flags a single machine needs: root is allowed, more ranks
# than cores are allowed, no core binding. Usage: tools/mpirun.sh -np 4 CMD...
set -euo pipefail
exec mpirun --allow-run-as-root --oversubscribe --bind-to none \
  --mca btl self,vader,tcp "$@"
