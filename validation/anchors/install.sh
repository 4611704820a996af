#!/usr/bin/env bash
# What the anchors need (validation/anchors/run.py): perf with `perf bench
# syscall fork` (perf >= 6.2) and hackbench (rt-tests). Debian bookworm's
# linux-perf is 6.1, which lacks `syscall fork`; bookworm-backports has 6.12,
# installed here (the perf package only: the kernel headers stay as they are).
# Best effort: on failure the anchors report says which anchor is missing.
set -uo pipefail
have_fork() { command -v perf >/dev/null 2>&1 && perf bench syscall 2>&1 | grep -q '^ *fork:'; }
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
[ ${#want[@]} -eq 0 ] && exit 0
echo "anchors/install.sh: installing ${want[*]}" >&2
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}" >/dev/null \
    || echo "anchors/install.sh: could not install ${want[*]}; the report will name the missing anchors" >&2
exit 0
