#!/usr/bin/env bash
# The reference documentation agrees with the program: the slash-command reference in docs/repl.md
# and doc/tokentop.1 is what the command table generates (tools/docs_sync.sh; a command added to
# the table without running make docs fails here), and the command-line options agree between the
# option tables in the source, --help and the manual page.
set -u
source "$(dirname "$0")/common.bash"
cd "$(dirname "$0")/../.."

check "docs/repl.md and doc/tokentop.1 hold the command table's reference (make docs)" \
    tools/docs_sync.sh "$BUILD" --check

# Options: the source's tables (app/cli.c's getopt table, app/main.c's and app/bench*.c's comparisons), the help of
# every subcommand, and the manual page. An alias (a second name for the same OPT_ code) needs to be
# in the manual page only.
opts() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
src=$( { grep -oE '^\s*\{"[a-z][a-z0-9-]*", [a-z_]+_argument' app/cli.c | grep -oE '"[^"]+"' |
         tr -d '"' | sed 's/^/--/'; grep -ohE 'strcmp\([a-z_]+(\[[a-z_+ 0-9]+\])?, "--[a-z0-9-]+"\)' app/main.c app/bench*.c; } | opts)
aliases=$(grep -oE '^\s*\{"[a-z][a-z0-9-]*", [a-z_]+_argument, 0, OPT_[A-Z_]+' app/cli.c |
          awk -F'[",]+' '{ code = $NF; gsub(/ /, "", code); if (code in seen) print "--" $2; seen[code] = 1 }' |
          sort -u)
help=$(for c in "" generate score tokenize bench; do "$BIN" $c --help 2>&1; done | opts)
man=$(sed 's/\\-/-/g' doc/tokentop.1 | opts)
missing() { comm -23 <(printf '%s\n' "$1" | sed '/^$/d' | sort -u) <(printf '%s\n' "$2" | sed '/^$/d' | sort -u) | tr '\n' ' '; }
m=$(missing "$src" "$man");            check "every option in the source is in the manual page${m:+ (missing: $m)}" test -z "$m"
m=$(missing "$help" "$man");           check "every option --help names is in the manual page${m:+ (missing: $m)}" test -z "$m"
m=$(missing "$man" "$src
--help
--version");                           check "the manual page names no option the program lacks${m:+ (unknown: $m)}" test -z "$m"
m=$(missing "$(missing "$src" "$aliases" | tr ' ' '\n')" "$help")
check "every option but an alias is in --help${m:+ (missing: $m)}" test -z "$m"
check "the option check sees the tables (at least 40 options)" test "$(printf '%s\n' "$src" | wc -l)" -ge 40

finish
