#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the build needs
# (a C compiler, make, static libc), installs opcost with its test extras,
# builds the probe and runs pytest (Python side and probe). CI runs this.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v make >/dev/null 2>&1 || missing+=(make)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
if ! printf 'int main(void){return 0;}\n' | cc -static -x c -o /dev/null - >/dev/null 2>&1; then
    missing+=(libc6-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check '.[test]'
make -C probe -s
python3 -m pytest -q "$@"
