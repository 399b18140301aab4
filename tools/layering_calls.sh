#!/usr/bin/env bash
# layering_calls.sh BUILD: no set of modules calls itself round a loop (ARCHITECTURE.md). A module is
# X.c with X.h; module A calls module B when A's object uses a symbol B's object defines (nm).
# Run by `make layering` once the objects are built. Prints the loop and exits 1.
set -u
build=${1:?usage: tools/layering_calls.sh BUILD}
cd "$(dirname "$0")/.."
objs=$(cd "$build" && ls core/*/*.o ui/*.o repl/*.o app/*.o gpu/*.o gpu/*/*.o 2>/dev/null)
[ -n "$objs" ] || { echo "layering: no objects under $build (build first)"; exit 1; }
edges=$(cd "$build" && for o in $objs; do nm -A "$o"; done | awk '
    { split($1, a, ":"); obj = a[1]; sub(/\.o$/, "", obj) }
    NF == 3 && $2 ~ /^[TDRBCWV]$/ { def[$3] = obj }
    NF == 3 && $2 == "U" { use[++n] = obj " " $3 }
    END { for (i = 1; i <= n; i++) { split(use[i], u, " "); if ((u[2] in def) && def[u[2]] != u[1])
              print u[1], def[u[2]] } }' | sort -u)
if ! out=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "layering: modules call each other in a loop (nm over $build):"
    printf '%s\n' "$out" | sed 's/^/  /'
    exit 1
fi
exit 0
