# common.bash: what the e2e scripts share (sourced, not run: tests/run.sh runs *.sh). The paths
# of the build, a temporary directory $tmp removed on exit (a script that needs more cleanup calls
# rm -rf "$tmp" in its own EXIT trap), ok/fail/check, which count failures in $fails, and finish,
# the summary line and exit status.
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/tokentop}
MKMODEL=$BUILD/tools/mkmodel
JSONCHECK=$BUILD/tools/jsoncheck
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok()   { echo "ok   $1"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name"; fi; }
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$(basename "$0"): $fails check(s) failed"
        exit 1
    fi
    echo "$(basename "$0"): all checks passed"
}
