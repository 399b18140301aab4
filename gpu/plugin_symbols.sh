#!/bin/sh
# plugin_symbols.sh PLUGIN HOST_EXPORTS: fails, naming them, when PLUGIN leaves symbols undefined
# that neither a library it links nor the binary (the names in HOST_EXPORTS) defines. The dynamic
# linker would otherwise say so only when tokentop opens the plugin (gpu/gpu.mk runs this after
# every plugin link).
set -eu
plugin=$1
exports=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --undefined-only "$plugin" | awk '$1 == "U" { sub(/@.*/, "", $2); print $2 }' | sort -u >"$tmp/undef"
ldd "$plugin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' >"$tmp/libs"
: >"$tmp/defined"
while read -r lib; do
    nm -D --defined-only "$lib" | awk '{ sub(/@.*/, "", $NF); print $NF }' >>"$tmp/defined"
done <"$tmp/libs"
sed -n 's/^ *\([A-Za-z_0-9]*\);$/\1/p' "$exports" >>"$tmp/defined"
sort -u "$tmp/defined" -o "$tmp/defined"
extra=$(comm -23 "$tmp/undef" "$tmp/defined")
if [ -n "$extra" ]; then
    echo "gpu: $plugin needs symbols nothing provides (add what tokentop must export to $exports):" $extra
    exit 1
fi
