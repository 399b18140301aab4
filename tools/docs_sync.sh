#!/usr/bin/env bash
# docs_sync.sh BUILD [--check]: the slash-command reference in docs/repl.md and doc/tokentop.1 is
# generated from the command table (BUILD/tools/cmdref): this puts it between each file's BEGIN and
# END markers (make docs), or with --check says which file differs and exits 1 (tests/e2e/docs.sh).
set -u
build=${1:?usage: tools/docs_sync.sh BUILD [--check]}
check=${2:-}
cd "$(dirname "$0")/.."
cmdref=$build/tools/cmdref
[ -x "$cmdref" ] || { echo "docs: $cmdref is not built (make $cmdref)"; exit 1; }
fail=0
# splice FILE FORMAT BEGIN-PATTERN END-PATTERN
splice() {
    local file=$1 fmt=$2 begin=$3 end=$4 gen new
    gen=$(mktemp) new=$(mktemp)
    "$cmdref" "$fmt" > "$gen" || { rm -f "$gen" "$new"; echo "docs: $cmdref $fmt failed"; fail=1; return; }
    if ! grep -q -F -- "$begin" "$file" || ! grep -q -F -- "$end" "$file"; then
        echo "docs: $file: the markers of the generated command reference are missing"
        rm -f "$gen" "$new"; fail=1; return
    fi
    B=$begin E=$end G=$gen awk '
        index($0, ENVIRON["B"]) { print; while ((getline l < ENVIRON["G"]) > 0) print l; skip = 1; next }
        index($0, ENVIRON["E"]) { skip = 0 }
        !skip { print }' "$file" > "$new"
    if cmp -s "$file" "$new"; then
        rm -f "$new"
    elif [ "$check" = --check ]; then
        echo "docs: $file: the command reference differs from the command table (run make docs):"
        diff -u "$file" "$new" | sed -n '3,40p'
        rm -f "$new"; fail=1
    else
        cat "$new" > "$file" && rm -f "$new"
        echo "docs: updated $file"
    fi
    rm -f "$gen"
}
splice docs/repl.md markdown '<!-- BEGIN command reference' '<!-- END command reference'
splice doc/tokentop.1 man '.\" BEGIN command reference' '.\" END command reference'
exit $fail
