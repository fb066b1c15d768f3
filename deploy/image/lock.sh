#!/usr/bin/env bash
# Regenerate deploy/image/requirements.lock: the runtime dependencies of pyproject.toml and its
# `channels` extra (the image serves every channel), pinned with their hashes, for the image's Python (3.11) on Linux x86_64 and aarch64
# (docs/decisions/0024-image-and-lock-file.md). Run it after changing [project] dependencies;
# tests/unit/test_image.py fails while the lock and pyproject.toml disagree.
#
#   deploy/image/lock.sh            re-resolve, keeping the pins that still satisfy pyproject.toml
#   deploy/image/lock.sh --upgrade  move every pin to its newest release (security updates)
set -euo pipefail
cd "$(dirname "$0")/../.."

UV_VERSION=0.13.9
TOOLS="${LAYBY_LOCK_TOOLS:-${TMPDIR:-/tmp}/layby-lock-uv-$UV_VERSION}"
if [ "$("$TOOLS/bin/uv" --version 2>/dev/null)" != "uv $UV_VERSION" ]; then
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q "uv==$UV_VERSION"
fi

lock=deploy/image/requirements.lock
# Wheels only, so no C compiler is ever needed, except the pure-Python packages that publish
# only a source archive (install.sh names the same ones).
SOURCE_ONLY=nkeys
other="$(mktemp)"
trap 'rm -f "$other"' EXIT

compile() {  # $1: target platform, $2: output file
  # uv's default index only: a machine's own uv settings (a mirror) must not change the pins.
  env -u UV_INDEX_URL -u UV_DEFAULT_INDEX -u UV_EXTRA_INDEX_URL -u UV_INDEX -u UV_FIND_LINKS \
    UV_NO_CONFIG=1 "$TOOLS/bin/uv" pip compile pyproject.toml --quiet \
    --python-version 3.11 --python-platform "$1" --only-binary :all: --no-binary "$SOURCE_ONLY" \
    --generate-hashes --extra channels \
    --custom-compile-command "deploy/image/lock.sh" \
    ${UPGRADE:+--upgrade} -o "$2"
}

UPGRADE=""
if [ "${1:-}" = "--upgrade" ]; then UPGRADE=1; fi
compile x86_64-manylinux_2_28 "$lock"
cp "$lock" "$other"
compile aarch64-manylinux_2_28 "$other"
if ! diff -u "$lock" "$other"; then
  echo "error: x86_64 and aarch64 resolve differently; the image needs one lock for both" >&2
  exit 1
fi
echo "wrote $lock ($(grep -c '==' "$lock") pins)"
