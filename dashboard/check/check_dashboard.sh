#!/usr/bin/env bash
# Type-checks a Grafana dashboard JSON (default: dashboard/hvdtune.json)
# against the Dashboard type of Grafana's published schema (npm
# @grafana/schema) with the TypeScript compiler, strict, with excess
# property checks: the JSON becomes an object literal that must satisfy
# Dashboard. Needs node_modules here (tools/setup.sh installs it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
json=${1:-$here/../hvdtune.json}
if [ ! -x "$here/node_modules/.bin/tsc" ] || [ ! -d "$here/node_modules/@grafana/schema" ]; then
  echo "check_dashboard: $here/node_modules lacks typescript or @grafana/schema; run tools/setup.sh" >&2
  exit 1
fi
work=$(mktemp -d "$here/.check.XXXXXX")
trap 'rm -rf "$work"' EXIT
# An annotation's query is the data source's own type, which Grafana's
# schema leaves generic (AnnotationQuery<TQuery extends DataQuery>); the
# Prometheus data source's fields are declared here. Everything else is
# checked against Dashboard as published.
{
  echo "import type { AnnotationQuery, Dashboard, DataQuery } from '@grafana/schema';"
  echo "interface PrometheusQuery extends DataQuery { expr: string; step?: string;"
  echo "  titleFormat?: string; textFormat?: string; useValueForTime?: boolean; }"
  echo "type PrometheusDashboard = Omit<Dashboard, 'annotations'> & {"
  echo "  annotations?: { list?: Array<AnnotationQuery<PrometheusQuery>> } };"
  printf 'export const dashboard = '
  cat "$json"
  echo ' satisfies PrometheusDashboard;'
} >"$work/dashboard.ts"
cat >"$work/tsconfig.json" <<JSON
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "target": "ES2020",
    "module": "ESNext", "moduleResolution": "bundler",
    "skipLibCheck": true, "typeRoots": ["$here/node_modules/@types"],
    "baseUrl": "$here", "paths": {"@grafana/schema": ["node_modules/@grafana/schema"]}
  },
  "files": ["dashboard.ts"]
}
JSON
"$here/node_modules/.bin/tsc" -p "$work/tsconfig.json"
echo "check_dashboard: $(basename "$json") satisfies @grafana/schema $(node -p "require('$here/node_modules/@grafana/schema/package.json').version") Dashboard"
