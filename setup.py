"""Build hook: `pip install .` compiles the static probe with make and ships it
inside the package as opcost/_probe/opcost-probe-<arch>, so no compiler is
needed at run time. The wheel is platform-specific because of it.
The probe's sources are shipped too (opcost/_probe/src): `opcost variants
--mode op` links a user's operation into its own build of the probe."""

import os
import platform
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ARCH = {"amd64": "x86_64", "i686": "i386", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                                    platform.machine())


class BuildProbe(build_py):
    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        out = f"build/opcost-probe-{ARCH}"
        subprocess.check_call(["make", "-C", str(here / "probe"), f"OUT={out}"])
        dest = Path(self.build_lib) / "opcost" / "_probe"
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / f"opcost-probe-{ARCH}"
        shutil.copy2(here / "probe" / out, target)
        os.chmod(target, 0o755)
        src = dest / "src"
        shutil.rmtree(src, ignore_errors=True)
        for f in probe_sources(here / "probe"):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(here / "probe" / f, src / f)


def probe_sources(probe: Path) -> list[Path]:
    """What `make -C` needs to build the probe: the Makefile, *.c and *.h."""
    return [Path("Makefile")] + sorted(p.relative_to(probe) for pat in ("*.c", "*.h", "bench/*.c", "bench/*.h")
                                       for p in probe.glob(pat))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildProbe}, distclass=BinaryDistribution)
