#!/usr/bin/env bash
# Installs the dashboard check's npm packages (package.json: @grafana/schema,
# typescript) into dashboard/check/node_modules, only when missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/node_modules/.bin/tsc" ] && [ -d "$here/node_modules/@grafana/schema" ]; then
  exit 0
fi
echo "setup: npm packages for the dashboard check into $here/node_modules"
cd "$here"
npm install --no-audit --no-fund --ignore-scripts --loglevel=error
