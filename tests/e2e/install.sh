#!/usr/bin/env bash
# `make install` gives a working program: installed into a staging directory (DESTDIR) and into a
# plain PREFIX, the program runs from another directory and finds its embedded models (through its
# own location, or $XDG_DATA_DIRS when the binary is elsewhere) and, when this build makes one, its
# GPU plugin; the man page renders without warnings and names every option and slash-command;
# `make uninstall` leaves nothing behind.
# make runs here with the variables of the make that runs the tests (MAKEFLAGS: mode, CUDA_ARCHS,
# SANITIZE), so nothing is rebuilt; run alone, give it the variables you built with, e.g.
# MAKEFLAGS="CUDA_ARCHS=90" tests/e2e/install.sh.
set -u
source "$(dirname "$0")/common.bash"
root=$(pwd)
# Without the parent's jobserver, whose descriptors this script does not hold.
mk() {
    MAKEFLAGS=$(sed -E 's/ ?--jobserver-(auth|fds)=[^ ]*//g' <<<"${MAKEFLAGS:-}") \
        make -C "$root" --no-print-directory -s "$@"
}
# A clean environment: no model or data directories but the ones a check names.
run() { (cd "$tmp/elsewhere" && env -u TOKENTOP_MODEL -u XDG_DATA_HOME HOME="$tmp/home" \
             XDG_DATA_DIRS="${DATA_DIRS:-$tmp/none}" "$@"); }
mkdir -p "$tmp/elsewhere" "$tmp/home"
"$BIN" generate --model models/kjv-target -p "And God said" -n 6 --greedy -q --backend cpu >"$tmp/ref" 2>/dev/null
plugin=
[ -f "$BUILD/tokentop-cuda.so" ] && plugin=tokentop-cuda.so   # CUDA=1 puts it beside the binary

# --- staged: DESTDIR + PREFIX
dest=$tmp/dest
prefix=/opt/tokentop-e2e
mk install DESTDIR="$dest" PREFIX="$prefix" >"$tmp/install.log" 2>&1
check "make install DESTDIR=... PREFIX=... succeeds" test $? -eq 0
tree=$dest$prefix
check "it installs the binary, the models and the man page" \
    test -x "$tree/bin/tokentop" -a -f "$tree/share/tokentop/models/kjv-target/model.safetensors" \
         -a -f "$tree/share/tokentop/models/kjv-draft/vocab.json" -a -f "$tree/share/man/man1/tokentop.1"
if [ -n "$plugin" ]; then
    check "it installs the CUDA plugin in lib/tokentop" test -f "$tree/lib/tokentop/$plugin"
else
    check "a build without the CUDA plugin installs none" test ! -e "$tree/lib/tokentop"
fi
check "nothing is written outside DESTDIR" test ! -e "$prefix"
run "$tree/bin/tokentop" generate -p "And God said" -n 6 --greedy -q --backend cpu >"$tmp/out" 2>"$tmp/err"
check "the installed program generates from another directory" \
    bash -c "test -s '$tmp/out' && cmp -s '$tmp/out' '$tmp/ref'"
run "$tree/bin/tokentop" generate -p "And God said" -n 6 --greedy -q --backend auto -v >"$tmp/auto" 2>"$tmp/auto.err"
check "it finds its models in ../share/tokentop" grep -q "^tokentop: $tree/bin/../share/tokentop/models/kjv-target: " "$tmp/auto.err"
check "--backend auto runs there too" cmp -s "$tmp/auto" "$tmp/ref"
if [ -n "$plugin" ]; then
    run "$tree/bin/tokentop" generate -p "And God said" -n 6 --greedy -q --backend cuda >"$tmp/cuda" 2>"$tmp/cuda.err"
    # "no CUDA driver" is said only of a plugin that was found ("no GPU plugin" otherwise).
    check "--backend cuda finds the installed plugin (and runs, or names the missing driver or device)" \
        bash -c "cmp -s '$tmp/cuda' '$tmp/ref' || grep -Eq '^tokentop: --backend cuda: no CUDA (driver|device)' '$tmp/cuda.err'"
fi
printf '/spec on\nAnd God said\n' | run "$tree/bin/tokentop" --draft "$tree/share/tokentop/models/kjv-draft" \
    --backend cpu -n 6 --temp 0 >"$tmp/spec" 2>"$tmp/spec.err"
check "the installed pair runs speculative decoding" test -s "$tmp/spec"

# The binary elsewhere: the data through $XDG_DATA_DIRS, or a message naming where it looked.
mkdir -p "$tmp/other/bin" && cp "$tree/bin/tokentop" "$tmp/other/bin/"
DATA_DIRS="$tmp/none:$tree/share" run "$tmp/other/bin/tokentop" generate -p "And God said" -n 6 --greedy -q \
    --backend cpu >"$tmp/xdg" 2>/dev/null
check "the models are found through \$XDG_DATA_DIRS" cmp -s "$tmp/xdg" "$tmp/ref"
run "$tmp/other/bin/tokentop" generate -p "And God said" -n 6 -q --backend cpu >/dev/null 2>"$tmp/nomodel"
rc=$?
check "without them: exit 1 and a message naming where it looked" \
    bash -c "[ $rc -eq 1 ] && grep -q 'no model: .*share/tokentop.*XDG_DATA_DIRS' '$tmp/nomodel'"

# --- the man page
man1=$tree/share/man/man1/tokentop.1
if command -v groff >/dev/null; then
    groff -man -Tutf8 -ww -z "$man1" >"$tmp/groff" 2>&1
    check "the man page renders without warnings (groff -ww)" test ! -s "$tmp/groff"
    MANWIDTH=80 man -l "$man1" >"$tmp/man.txt" 2>/dev/null || groff -man -Tutf8 "$man1" 2>/dev/null | col -bx >"$tmp/man.txt"
else
    echo "     (groff is not installed: the man page is checked by a simple lint)"
    check "the man page has a title, NAME and SYNOPSIS, and only man(7) macros" \
        bash -c "grep -q '^\.TH TOKENTOP 1 ' '$man1' && grep -q '^\.SH NAME' '$man1' && grep -q '^\.SH SYNOPSIS' '$man1' \
                 && ! grep -Ev '^\.(\\\\\"|TH|SH|SS|TP|PP|RS|RE|B|I|BR|BI|IR|IB|RB|RI|br|nf|fi)( |$)' '$man1' | grep -q '^\.'"
    sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' "$man1" >"$tmp/man.txt"
fi
# Every long option of the commands and every slash-command appears in it.
opts=$("$BIN" generate --help | grep -oE -- '--[a-z][a-z-]+' | sort -u)
cmds=$(printf '/help\n' | "$BIN" --backend cpu --model "$root/models/kjv-target" 2>&1 >/dev/null \
       | grep -oE '^  /[a-z]+' | tr -d ' ' | sort -u)
missing=
for w in $opts $cmds; do grep -q -- "$w" "$tmp/man.txt" || missing="$missing $w"; done
check "the man page names every option and slash-command (missing:${missing:- none})" test -z "$missing"
check "the man page names its files and environment" \
    bash -c "grep -q TOKENTOP_GPU_PLUGIN '$tmp/man.txt' && grep -q TOKENTOP_MODEL '$tmp/man.txt' \
             && grep -q 'lib/tokentop/tokentop-cuda.so' '$tmp/man.txt' && grep -q XDG_DATA_DIRS '$tmp/man.txt'"

# --- uninstall
mk uninstall DESTDIR="$dest" PREFIX="$prefix" >"$tmp/uninstall.log" 2>&1
check "make uninstall succeeds" test $? -eq 0
check "make uninstall leaves no file behind" test -d "$tree/bin" -a -z "$(find "$dest" -type f)"
check "make uninstall removes tokentop's own directories" \
    test ! -e "$tree/share/tokentop" -a ! -e "$tree/lib/tokentop"

# --- a plain PREFIX
mk install PREFIX="$tmp/prefix" >"$tmp/install2.log" 2>&1
check "make install PREFIX=... succeeds" test $? -eq 0
run "$tmp/prefix/bin/tokentop" generate -p "And God said" -n 6 --greedy -q --backend cpu >"$tmp/out2" 2>/dev/null
check "the program installed in PREFIX runs from another directory" cmp -s "$tmp/out2" "$tmp/ref"
mk uninstall PREFIX="$tmp/prefix" >/dev/null 2>&1
check "make uninstall PREFIX=... leaves no file behind" test -d "$tmp/prefix/bin" -a -z "$(find "$tmp/prefix" -type f)"

[ "$fails" -eq 0 ] || { echo "$fails failed"; cat "$tmp/install.log"; exit 1; }
