#!/bin/sh
# The image's install steps, shared by the Dockerfile and tests/e2e/test_image.py so that the
# test runs exactly what the build runs (docs/decisions/0024-image-and-lock-file.md).
#
#   install.sh deps VENV          a venv without pip, holding the locked runtime dependencies:
#                                 hashes required, no resolution (--no-deps), wheels only except
#                                 the pure-Python package that publishes only a source archive
#   install.sh app VENV WHEELDIR  our wheel from WHEELDIR into it (--no-deps), then `pip check`
#
# pip runs from the interpreter named by $PYTHON (default python3) and installs into VENV with
# --python, so neither pip nor setuptools ends up in the venv the image ships.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
step="${1:?usage: install.sh deps VENV | install.sh app VENV WHEELDIR}"
venv="${2:?usage: install.sh deps VENV | install.sh app VENV WHEELDIR}"

pip() {
  "$python" -m pip --python "$venv/bin/python" --disable-pip-version-check "$@"
}

case "$step" in
  deps)
    "$python" -m venv --without-pip "$venv"
    # Same exceptions as lock.sh's SOURCE_ONLY.
    pip install --quiet --require-hashes --no-deps --only-binary :all: --no-binary nkeys \
      -r "$here/requirements.lock"
    ;;
  app)
    wheels="${3:?usage: install.sh app VENV WHEELDIR}"
    pip install --quiet --no-deps --no-index "$wheels"/layby_server-*.whl
    pip check
    ;;
  *)
    echo "install.sh: unknown step '$step' (deps or app)" >&2
    exit 2
    ;;
esac
