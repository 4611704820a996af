"""The real kernels the VM target's tests boot: Debian's cloud kernels
6.1.0-50 (6.1.176-1) and 6.1.0-56 (6.1.192-2) for amd64, and 6.1.0-50 for
arm64 (tests/test_vm_arm64.py), fetched with `apt-get download` (the arm64
one with its architecture named: `dpkg --add-architecture arm64` is done
first when needed) into a cache outside the repository and unpacked with
`dpkg-deb -x` (never installed as this machine's kernel, never vendored).
Idempotent: a kernel already unpacked is not fetched again.

    python3 tests/kernels.py          # fetch all three (test.sh does this)
    python3 tests/kernels.py --print  # the amd64 vmlinuz paths, one a line

OPCOST_KERNEL_CACHE overrides the cache directory
(default: ${XDG_CACHE_HOME:-~/.cache}/opcost-kernels).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("linux-image-6.1.0-50-cloud-amd64", "linux-image-6.1.0-56-cloud-amd64")
ARM64 = "linux-image-6.1.0-50-cloud-arm64:arm64"   # apt's name: another architecture's package is named with it


def cache_dir() -> Path:
    env = os.environ.get("OPCOST_KERNEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opcost-kernels"


def kernel_path(package: str) -> Path:
    """Where the unpacked vmlinuz of `package` lies (it may not exist yet)."""
    return cache_dir() / package.split(":")[0] / "vmlinuz"


def arm64_kernel() -> Path | None:
    """The arm64 kernel when it is unpacked, else None."""
    return kernel_path(ARM64) if kernel_path(ARM64).is_file() else None


def add_architecture(package: str) -> None:
    """`dpkg --add-architecture` for a package named with another
    architecture (pkg:arm64), when dpkg does not know it yet."""
    if ":" not in package:
        return
    arch = package.split(":", 1)[1]
    cp = subprocess.run(["dpkg", "--print-foreign-architectures"], capture_output=True, text=True)
    if arch not in cp.stdout.split():
        subprocess.run(["dpkg", "--add-architecture", arch], check=True)


def cached() -> list[Path]:
    """The kernels already unpacked, in PACKAGES order (none missing), or []."""
    paths = [kernel_path(p) for p in PACKAGES]
    return paths if all(p.is_file() for p in paths) else []


def fetch(package: str, update: bool = True) -> Path:
    """The vmlinuz of a Debian kernel package, fetched and unpacked once."""
    out = kernel_path(package)
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        def download() -> subprocess.CompletedProcess:
            return subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True, text=True)

        cp = download()
        if cp.returncode != 0 and update:
            add_architecture(package)
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
            cp = download()
        if cp.returncode != 0:
            raise SystemExit(f"kernels.py: apt-get download {package} failed: "
                             f"{(cp.stderr.strip().splitlines() or ['?'])[-1]}")
        debs = glob.glob(os.path.join(tmp, "*.deb"))
        root = os.path.join(tmp, "root")
        subprocess.run(["dpkg-deb", "-x", debs[0], root], check=True)
        images = glob.glob(os.path.join(root, "boot", "vmlinuz-*"))
        if len(images) != 1:
            raise SystemExit(f"kernels.py: {package} holds {len(images)} vmlinuz images, expected 1")
        shutil.copyfile(images[0], str(out) + ".part")
        os.replace(str(out) + ".part", out)
        (out.parent / "release").write_text(os.path.basename(images[0]).removeprefix("vmlinuz-") + "\n")
    return out


def main(argv: list[str]) -> int:
    if "--print" in argv:
        for p in cached():
            print(p)
        return 0
    for pkg in (*PACKAGES, ARM64):
        print(fetch(pkg))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
