#!/bin/sh
# Rebuilds the dashboard's Plotly.js (src/nosqltune/dashboard/static/plotly.min.js) with only the traces the page
# draws (entry.js): about 1.5 MB against the full bundle's 4.8 MB, which a browser took 2.2 s to evaluate on this
# project's 2-core machines (docs/dashboard.md). Needs Node.js and npm; the versions are pinned in package.json.
# Run it on purpose, when Plotly is upgraded or a trace type is added, and commit the result.
set -eu
cd "$(dirname "$0")"
out=$(cd ../../src/nosqltune/dashboard/static && pwd)/plotly.min.js
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp package.json entry.js build.js "$work/"
(cd "$work" && npm install --no-audit --no-fund --no-package-lock --ignore-scripts >/dev/null && node build.js "$out")
