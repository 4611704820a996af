#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the build needs
# (a C compiler, make, static libc, objdump, the i386, aarch64 and arm
# (armv7 hard-float) cross compilers, qemu-user for the aarch64 and arm
# probes, perf and hackbench for the anchors, hyperfine and benchstat for the
# report formats, chromium for the HTML report's browser test, zsh for the
# completion test, postgresql for
# the PostgreSQL store's tests, openssh-server and openssh-client for the
# fleet's tests, qemu-system-x86, qemu-system-arm and three Debian kernels
# (fetched, not installed) for the vm target's boots), installs
# opcost with its test extras, builds the probes, type-checks src/opcost
# (mypy, configured in pyproject.toml), checks its layers (import-linter's
# lint-imports, contracts in pyproject.toml), builds the docs (mkdocs --strict)
# and runs pytest: the Python side and
# the host probe, then the probe's tests again on the i386 probe (natively),
# on the aarch64 probe (under qemu-aarch64) and on the arm probe (under
# qemu-arm): correctness only. CI runs this.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v make >/dev/null 2>&1 || missing+=(make)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v objdump >/dev/null 2>&1 || missing+=(binutils)
command -v i686-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-i686-linux-gnu)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu)
command -v arm-linux-gnueabihf-gcc >/dev/null 2>&1 || missing+=(gcc-arm-linux-gnueabihf)
if ! command -v qemu-aarch64 >/dev/null 2>&1 || ! command -v qemu-arm >/dev/null 2>&1; then
    missing+=(qemu-user)
fi
command -v perf >/dev/null 2>&1 || missing+=(linux-perf)    # anchors: perf bench
command -v hackbench >/dev/null 2>&1 || missing+=(rt-tests) # anchors: hackbench
command -v hyperfine >/dev/null 2>&1 || missing+=(hyperfine) # report: hyperfine-json layout
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # the HTML report, opened by playwright
command -v zsh >/dev/null 2>&1 || missing+=(zsh)            # opcost completion zsh, tried in a real zsh
# the PostgreSQL store's tests start a server of their own (tests/pgserver.py)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
# the fleet's tests: three sshd "hosts" on 127.0.0.2-4, reached with the OpenSSH client
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then missing+=(openssh-server); fi
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
# the vm target's tests boot Debian kernels in QEMU (tests/test_vm_boot.py)
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
command -v qemu-system-aarch64 >/dev/null 2>&1 || missing+=(qemu-system-arm)   # arm64 guests (tests/test_vm_arm64.py)
command -v lz4 >/dev/null 2>&1 || missing+=(lz4)   # Debian's kernels' payload: the vm target's PVH entry under TCG
if ! printf 'int main(void){return 0;}\n' | cc -static -x c -o /dev/null - >/dev/null 2>&1; then
    missing+=(libc6-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check '.[test]'
# benchstat, the version checked here, reads `opcost report --format go` in
# tests/test_report.py; installed once into a cache directory put on PATH.
GO=$(command -v go || echo /usr/local/go/bin/go)
TOOLS="${XDG_CACHE_HOME:-$HOME/.cache}/opcost-tools/bin"
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
if [ ! -x "$TOOLS/benchstat" ] || [ "$(cat "$TOOLS/benchstat.version" 2>/dev/null)" != "$BENCHSTAT_VERSION" ]; then
    echo "test.sh: installing benchstat@$BENCHSTAT_VERSION into $TOOLS" >&2
    mkdir -p "$TOOLS"
    GOBIN="$TOOLS" "$GO" install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
    echo "$BENCHSTAT_VERSION" >"$TOOLS/benchstat.version"
fi
export PATH="$TOOLS:$PATH"
make -C probe -s
make -C probe -s CC=i686-linux-gnu-gcc OUT=build/opcost-probe-i386
make -C probe -s CC=aarch64-linux-gnu-gcc OUT=build/opcost-probe-aarch64
make -C probe -s CC=arm-linux-gnueabihf-gcc OUT=build/opcost-probe-arm
# The vm target's test kernels (Debian's linux-image-6.1.0-{50,56}-cloud-amd64 and
# linux-image-6.1.0-50-cloud-arm64:arm64, after dpkg --add-architecture arm64), fetched
# once with apt-get download into a cache outside the repository; their boots must run here.
python3 tests/kernels.py >/dev/null
export OPCOST_REQUIRE_VM=1
# Cross-architecture tests must run here, not skip.
export OPCOST_REQUIRE_ARCHES=x86_64,i386,aarch64,arm
# The tools the report and completion tests check against must be there, not skip;
# hyperfine-scripts: hyperfine's own scripts/ in the shared directory beside the
# checkout (../shared/anchors/hyperfine-scripts, or $OPCOST_SHARED), run from there:
# required only where that directory is (a clone elsewhere has none: those tests
# skip, named with their reason in the summary, -rs below).
export OPCOST_REQUIRE_TOOLS=benchstat,hyperfine,zsh
shared=${OPCOST_SHARED:-$(cd .. && pwd)/shared}
if [ -f "$shared/anchors/hyperfine-scripts/advanced_statistics.py" ]; then
    OPCOST_REQUIRE_TOOLS+=,hyperfine-scripts
else
    echo "test.sh: no $shared/anchors/hyperfine-scripts (the shared directory beside the checkout, or \$OPCOST_SHARED): the tests that run hyperfine's own scripts skip" >&2
fi
# The HTML report's browser test must run here, not skip (chromium, playwright).
export OPCOST_REQUIRE_BROWSER=1
# The store tests must run against a real PostgreSQL server too, not skip.
export OPCOST_REQUIRE_POSTGRES=1
# The fleet's sshd hosts (tests/test_fleet.py) must start here, not skip.
export OPCOST_REQUIRE_SSHD=1
python3 -m mypy
# The layers of docs/architecture.md (contracts in pyproject.toml), on the
# source here, not on the installed copy.
PYTHONPATH=src lint-imports
# The documentation: every page in mkdocs.yml's nav, no broken link; the CLI
# reference is generated from the parsers at build time (docs/hooks/cli_reference.py).
python3 -m mkdocs build --strict --site-dir build/site   # not --quiet: it hides the warnings --strict counts
# On every CPU (pytest-xdist): tests that share one sshd set, QEMU boots or the
# malformed corpus run in a group on one worker (tests/conftest.py); `./test.sh -n 0`
# runs them all in this one process instead.
python3 -m pytest -q -rs --durations=25 -n auto --dist loadgroup "$@"
