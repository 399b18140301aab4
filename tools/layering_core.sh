#!/usr/bin/env bash
# layering_core.sh: the include rules inside core/ (ARCHITECTURE.md, "Rooms of core/"), run by
# `make layering`. Every core/ source lives in a room; a room includes only its own headers and
# those of the rooms listed below it; and no set of modules (X.c with X.h), in the whole tree,
# includes itself round a loop. Prints every offending line and exits 1.
set -u
cd "$(dirname "$0")/.."

# room: the rooms it may include besides itself (lower ones only, so the rooms form no loop).
declare -A allowed=(
    [base]=""
    [tokenizer]="base"
    [arch]="base"
    [model]="base arch tokenizer"
    [engine]="base arch model"
    [cpu]="base arch model engine"
    [decode]="base arch model tokenizer engine"
    [session]="base arch model tokenizer engine decode"
)

fail=0
for f in core/*.[ch]; do
    [ -e "$f" ] || continue
    echo "layering: $f: every core/ source belongs in a room (core/ROOM/, ARCHITECTURE.md)"
    fail=1
done
for dir in core/*/; do
    room=$(basename "$dir")
    if [ -z "${allowed[$room]+x}" ]; then
        echo "layering: core/$room/ is not a room ARCHITECTURE.md names (tools/layering_core.sh)"
        fail=1
        continue
    fi
    ok=" $room ${allowed[$room]} "
    while IFS=: read -r file line inc; do
        to=$(sed -E 's/.*"core\/([a-z_0-9]+)\/.*/\1/' <<<"$inc")
        case "$ok" in
            *" $to "*) ;;
            *) echo "layering: $file:$line: core/$room/ may not include core/$to/ (allowed:${allowed[$room]:- none})"
               fail=1 ;;
        esac
    done < <(grep -n -E '^\s*#\s*include\s*"core/' "$dir"*.[ch] /dev/null 2>/dev/null)
done

# Include loops between modules, anywhere: a module is X.c with X.h (and X.cu, X.cc, and its
# private header X_internal.h, shared by the module's own sources), so the edge
# repl/compare.h -> repl/commands.h and the edge repl/commands.c -> repl/compare.h make a loop
# between the modules repl/compare and repl/commands. tsort refuses a graph with a cycle and names it.
edges=$(grep -rn -E '^\s*#\s*include\s*"[a-z]+/[^"]+"' --include='*.[ch]' --include='*.cu' \
            --include='*.cc' core gpu ui repl app 2>/dev/null |
        sed -E 's/^([^:]+):[0-9]+:.*"([^"]+)".*/\1 \2/' |
        sed -E 's/\.(c|h|cu|cc)( |$)/\2/g; s/_internal( |$)/\1/g' | awk '$1 != $2')
if ! out=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "layering: modules (X.c with X.h) include each other in a loop:"
    printf '%s\n' "$out" | sed 's/^/  /'
    fail=1
fi
exit $fail
