# common.bash: what the check-style e2e scripts share (sourced, not run: tests/run.sh runs *.sh).
# The paths of the build, a temporary directory removed on exit, and ok/fail/check, which count
# failures in $fails.
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/tokentop}
MKMODEL=$BUILD/tools/mkmodel
JSONCHECK=$BUILD/tools/jsoncheck
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok()   { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name"; fi; }
