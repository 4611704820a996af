"""Build hook: `pip install .` compiles the static probe with make and ships it
inside the package as opcost/_probe/opcost-probe-<arch>, so no compiler is
needed at run time. The wheel is platform-specific because of it."""

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


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildProbe}, distclass=BinaryDistribution)
