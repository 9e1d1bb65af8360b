#!/bin/sh
# Build tenure's server into PREFIX, a virtual environment: the compiled build
# (mypyc), with the server extra (aiohttp, prometheus-client, uvloop, the CLI) and the etcd
# extra (--cluster etcd://...).
#
#   deploy/image/build.sh PREFIX [SOURCE]
#
# The image's only build step (deploy/image/Dockerfile RUNs it), and what
# tests/deploy/test_image.py runs outside Docker into a temporary directory, so the
# steps the image takes are the steps the tests take. SOURCE is the checkout to build
# (default: the one this script is in). Needs python3 (>= 3.11, with venv), a C
# compiler and Python's headers, and PyPI (pip fetches the build's and the server's
# dependencies).
#
# TENURE_COMPILE (default: always) is the wheel hook's switch (CONTRIBUTING.md, "The
# compiled build"): always fails the build without a compiler rather than shipping a
# pure build that serves about half as fast; never builds the pure one on purpose.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 PREFIX [SOURCE]" >&2
  exit 2
fi
prefix=$1
source=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
python=${PYTHON:-python3}
compile=${TENURE_COMPILE:-always}
# The install imports itself, never a checkout's source a caller's PYTHONPATH names.
unset PYTHONPATH PYTHONHOME
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
# hatch-mypyc compiles in the tree it builds: build a copy, never the checkout (its
# src/ would get extensions that shadow the .py files being edited). A checkout's own
# in-place build (scripts/compile's *.so) and caches are left out of the copy.
mkdir "$work/src"
cp "$source/pyproject.toml" "$source/hatch_build.py" "$source/README.md" "$work/"
cp -R "$source/src/tenure" "$source/src/_tenure_console.py" "$work/src/"
find "$work/src" \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +
"$python" -m venv "$prefix"
"$prefix/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --upgrade pip
echo "building tenure ($compile) into $prefix: the compile takes a minute or two" >&2
TENURE_COMPILE=$compile "$prefix/bin/python" -m pip install -q --disable-pip-version-check \
  --no-cache-dir "$work[server,etcd]"
version=$("$prefix/bin/tenure" --version)
echo "$version" >&2
# The build the image promises: refuse to finish with another one.
case "$compile:$version" in
  always:*"(compiled build)"* | never:*"(pure build)"* | auto:*) ;;
  *)
    echo "expected the build TENURE_COMPILE=$compile makes, got: $version" >&2
    exit 1
    ;;
esac
