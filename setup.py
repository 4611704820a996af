"""Build hook: `pip install .` compiles the static probe with make and ships it
inside the package as opcost/_probe/opcost-probe-<arch>, so no compiler is
needed at run time; on x86_64 it also builds the i386 probe when a compiler
for it is installed (the kernel runs both). The probe's sources go along
(opcost/_probe/src): `opcost probe build` builds probes for other
architectures from them, and `opcost variants --mode op` links a user's
operation into its own build of the probe. The wheel is platform-specific
because of it."""

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
        built = {ARCH: here / "probe" / out}
        if ARCH == "x86_64":
            i386 = self._try_i386(here)
            if i386:
                built["i386"] = i386
        for arch, path in built.items():
            target = dest / f"opcost-probe-{arch}"
            shutil.copy2(path, target)
            os.chmod(target, 0o755)
        src = dest / "src"
        shutil.rmtree(src, ignore_errors=True)
        for f in probe_sources(here / "probe"):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(here / "probe" / f, src / f)

    @staticmethod
    def _try_i386(here):
        """The i386 probe, if a compiler for it is here; never fails the install."""
        for cc in ("i686-linux-gnu-gcc", "cc -m32"):
            if not shutil.which(cc.split()[0]):
                continue
            out = "build/opcost-probe-i386"
            cp = subprocess.run(["make", "-C", str(here / "probe"), "-s", f"CC={cc}", f"OUT={out}"],
                                capture_output=True)
            if cp.returncode == 0:
                return here / "probe" / out
        print("opcost: no i386 compiler (apt-get install gcc-i686-linux-gnu): installing without the i386 probe")
        return None


def probe_sources(probe: Path) -> list[Path]:
    """What `make -C` needs to build the probe: the Makefile, *.c, *.h, *.S."""
    patterns = ("*.c", "*.h", "*.S", "lib/*.[ch]", "bench/*.[ch]")
    return [Path("Makefile")] + sorted(p.relative_to(probe) for pat in patterns
                                       for p in probe.glob(pat) if not p.name.endswith("-tiny.c"))  # generated


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildProbe}, distclass=BinaryDistribution)
