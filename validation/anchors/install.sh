#!/usr/bin/env bash
# What the anchors need (validation/anchors/run.py):
#   * perf with `perf bench syscall fork` (perf >= 6.2) and hackbench (rt-tests).
#     Debian bookworm's linux-perf is 6.1, which lacks `syscall fork`;
#     bookworm-backports has 6.12, installed here (the perf package only).
#   * lmbench 3, which no registry serves: built from the tarball in the shared
#     directory next to the repository (../shared/anchors, or $OPCOST_SHARED/anchors)
#     into a cache directory outside the repository ($OPCOST_ANCHORS_DIR, default
#     ${XDG_CACHE_HOME:-~/.cache}/opcost-anchors), never into the tree. Needs
#     libtirpc-dev. Done once: later calls see the stamp and return at once
#     (a checkout without the shared directory keeps a build made before).
#     The outcome is written to lmbench.status there ("ok BINDIR" or "failed:
#     REASON"), which run.py reads to say why lmbench's rows cannot run.
# Best effort: nothing here fails CI; the anchors report names what is missing.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shared=${OPCOST_SHARED:-$here/../../../shared}
tarball=$shared/anchors/lmbench-941a0dc.tar.gz
dest=${OPCOST_ANCHORS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opcost-anchors}
status=$dest/lmbench.status
say() { echo "anchors/install.sh: $*" >&2; }

have_fork() { command -v perf >/dev/null 2>&1 && perf bench syscall 2>&1 | grep -q '^ *fork:'; }
built_ok() { [ -f "$dest/lmbench.stamp" ] && [ -x "$dest/lmbench/bin/$(ls "$dest/lmbench/bin" 2>/dev/null | head -1)/lat_syscall" ]; }
lmbench_done() {  # built from this very tarball (or, with no tarball here, built before from one)
    built_ok || return 1
    if [ ! -f "$tarball" ]; then
        say "no $tarball here: keeping the lmbench built before from $(cat "$dest/lmbench.stamp" | cut -c1-12)..."
        echo "ok $(ls -d "$dest"/lmbench/bin/*/ | head -1 | sed 's|/$||')" > "$status"
        return 0
    fi
    head -1 "$status" 2>/dev/null | grep -q '^ok ' &&
        [ "$(cat "$dest/lmbench.stamp")" = "$(sha256sum < "$tarball" | cut -d' ' -f1)" ]
}

want=()
command -v hackbench >/dev/null 2>&1 || want+=(rt-tests)
if ! have_fork; then
    if grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
        list=/etc/apt/sources.list.d/opcost-backports.list
        [ -f "$list" ] || echo "deb http://deb.debian.org/debian bookworm-backports main" > "$list"
        want+=(linux-perf/bookworm-backports)
    else
        want+=(linux-perf)
    fi
fi
if ! lmbench_done; then
    [ -f /usr/include/tirpc/rpc/rpc.h ] || want+=(libtirpc-dev)
    command -v make >/dev/null 2>&1 || want+=(make)
    command -v cc >/dev/null 2>&1 || want+=(gcc)
fi
if [ ${#want[@]} -gt 0 ]; then
    say "installing ${want[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}" >/dev/null \
        || say "could not install ${want[*]}; the report will name the missing anchors"
fi
lmbench_done && exit 0

fail() { mkdir -p "$dest" && echo "failed: $*" > "$status"; say "lmbench not built: $*"; exit 0; }
mkdir -p "$dest" || { say "cannot create $dest"; exit 0; }
[ -f "$tarball" ] || fail "no lmbench source ($tarball not found: the shared directory is expected next to the repository, or in \$OPCOST_SHARED)"
[ -f /usr/include/tirpc/rpc/rpc.h ] || fail "libtirpc-dev is not installed (apt-get install libtirpc-dev)"
build=$(mktemp -d "$dest/build.XXXXXX") || fail "mktemp in $dest failed"
log=$dest/lmbench-build.log
if ! tar xzf "$tarball" -C "$build" 2>"$log"; then
    rm -rf "$build"; fail "cannot unpack $tarball: $(tail -1 "$log")"
fi
# The checked recipe (../shared/anchors/README.md): link libtirpc, then build.
sed -i 's|^#LDLIBS="${LDLIBS} -ltirpc"|LDLIBS="${LDLIBS} -ltirpc"|;
        s|^#CFLAGS="${CFLAGS} -I/usr/include/tirpc"|CFLAGS="${CFLAGS} -I/usr/include/tirpc"|' "$build/lmbench/scripts/build"
if ! make -s -C "$build/lmbench/src" lmbench >"$log" 2>&1; then
    why=$(grep -i 'error' "$log" | head -1); [ -n "$why" ] || why=$(grep -v '^\s*$' "$log" | tail -1)
    rm -rf "$build"; fail "make failed ($why; full log: $log)"
fi
bindir=$(ls -d "$build"/lmbench/bin/*/ 2>/dev/null | head -1)
missing=""
for b in lat_syscall lat_sig lat_pipe lat_unix lat_ctx lat_proc lat_pagefault lat_mmap hello; do
    [ -x "$bindir/$b" ] || missing="$missing $b"
done
if [ -z "$bindir" ] || [ -n "$missing" ]; then
    rm -rf "$build"; fail "make succeeded but did not build:${missing:- any binary} (log: $log)"
fi
os=$(basename "$bindir")
rm -rf "$dest/lmbench"
mv "$build/lmbench" "$dest/lmbench" || { rm -rf "$build"; fail "cannot move the build to $dest/lmbench"; }
rmdir "$build"
sha256sum < "$tarball" | cut -d' ' -f1 > "$dest/lmbench.stamp"
echo "ok $dest/lmbench/bin/$os" > "$status"
say "lmbench built in $dest/lmbench/bin/$os"
exit 0
