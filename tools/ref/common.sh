# common.sh: what mkgolden.sh and mkbeams.sh share (sourced, not run): the repository root as the
# working directory, the mkmodel and Python they run (MKMODEL, PY may override them), the golden
# folder OUT, and a scratch folder $tmp removed on exit.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MKMODEL=${MKMODEL:-build/tools/mkmodel}
PY=${PY:-/usr/bin/python3}
OUT=tests/golden
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
