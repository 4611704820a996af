"""Build hook: `pip install .` compiles the static probe with make and ships it
inside the package as opcost/_probe/opcost-probe-<arch>, so no compiler is
needed at run time; on x86_64 it also builds the i386 probe when a compiler
for it is installed (the kernel runs both). <arch> is opcost's name for the
machine (src/opcost/arches.py: armv7l and armv8l are "arm"), checked against
the ELF header of what the native compiler built: a 64-bit kernel under a
32-bit Arm userland says aarch64 but builds arm, and the probe is named for
what it is. The probe's sources go along
(opcost/_probe/src): `opcost probe build` builds probes for other
architectures from them, and `opcost variants --mode op` links a user's
operation into its own build of the probe. The wheel is platform-specific
because of it.

What is shipped is checked by running it (`opcost-probe version`; an arm
probe under qemu-arm when it is here, else by its ELF header): make trusts
timestamps, so an empty or truncated probe newer than its sources (a killed
link, a full disk) would be shipped as it is. A probe that does not run is
rebuilt from scratch (make -B) once; the host's probe still not running
fails the install with one line, an extra architecture's is left out."""

import importlib.util
import os
import platform
import shutil
import struct
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py


def _load_arches():
    """src/opcost/arches.py by path: the package is not importable yet."""
    spec = importlib.util.spec_from_file_location(
        "_opcost_arches", Path(__file__).resolve().parent / "src" / "opcost" / "arches.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


arches = _load_arches()
ARCH = arches.native_arch(platform.machine(), struct.calcsize("P") * 8)


def shipped_arch(machine_arch: str, built: Path) -> str:
    """The name the probe is shipped under: what its ELF header says it is
    (a 32-bit userland on a 64-bit Arm kernel: uname says aarch64, cc builds
    arm), else the machine's."""
    return arches.elf_arch(built) or machine_arch


def probe_fault(path: Path, arch: str) -> str | None:
    """Why the probe at `path` cannot be shipped, None when it runs: its
    `version` exits 0 and names it. A probe this machine cannot run (arm
    without qemu-arm, i386 on a kernel without 32-bit support) is judged by
    its ELF header alone."""
    runner: list[str] = []
    if arch != ARCH and arch == "arm":
        qemu = shutil.which("qemu-arm")
        if qemu is None:
            return None if arches.elf_arch(path) == arch else "not an arm ELF executable"
        runner = [qemu]
    try:
        cp = subprocess.run([*runner, str(path), "version"], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "`version` did not finish within 60 s"
    except OSError as e:
        if arch != ARCH and e.errno == 8 and arches.elf_arch(path) == arch:   # ENOEXEC: no i386 support here
            return None
        return e.strerror or str(e)
    if cp.returncode != 0 or not cp.stdout.startswith("opcost-probe "):
        why = (cp.stderr.strip().splitlines() or cp.stdout.strip().splitlines() or ["no output"])[-1]
        return f"`version` exited with status {cp.returncode}: {why}"
    return None


class BuildProbe(build_py):
    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        out = f"build/opcost-probe-{ARCH}"
        subprocess.check_call(["make", "-C", str(here / "probe"), f"OUT={out}"])
        dest = Path(self.build_lib) / "opcost" / "_probe"
        dest.mkdir(parents=True, exist_ok=True)
        arch = shipped_arch(ARCH, here / "probe" / out)
        if arch != ARCH:
            print(f"opcost: uname says {platform.machine()} but cc builds {arch} binaries: shipping the {arch} probe")
        print(f"opcost: built the {arch} probe ({out})")
        built = {arch: (here / "probe" / out, [])}
        if ARCH == "x86_64":
            i386 = self._try_i386(here)
            if i386:
                built["i386"] = i386
        if arch != "arm":
            arm = self._try_arm(here)
            if arm:
                built["arm"] = arm
        for a, (path, make_args) in built.items():
            target = dest / f"opcost-probe-{a}"
            self._ship(path, target, a)
            fault = probe_fault(target, a)
            if fault is None:
                continue
            # make trusts timestamps: an empty or cut probe newer than the sources is "up to date"
            print(f"opcost: the {a} probe {path} does not run ({fault}): rebuilding it from scratch")
            path.unlink(missing_ok=True)
            cp = subprocess.run(["make", "-B", "-s", "-C", str(here / "probe"), *make_args,
                                 f"OUT={path.relative_to(here / 'probe')}"], capture_output=True, text=True)
            if cp.returncode == 0 and path.is_file():
                self._ship(path, target, a)
                fault = probe_fault(target, a)
            else:
                fault = (cp.stderr.strip().splitlines() or ["make failed"])[-1]
            if fault is None:
                print(f"opcost: rebuilt the {a} probe; it runs")
                continue
            target.unlink(missing_ok=True)
            if a == arch:
                raise SystemExit(f"opcost: the {a} probe does not run even rebuilt ({fault}); nothing installed: "
                                 f"check the compiler (`make -C probe -B` shows its output) and the free space")
            print(f"opcost: the {a} probe does not run even rebuilt ({fault}): installing without it")
        for a, (path, make_args) in built.items():
            # the init of the virtual machines the vm target boots (probe/vminit), built beside the probe
            vminit = Path(str(path) + "-vminit")
            if (dest / f"opcost-probe-{a}").is_file() and vminit.is_file():
                shutil.copy2(vminit, dest / f"opcost-vminit-{a}")
                os.chmod(dest / f"opcost-vminit-{a}", 0o755)
        # the QEMU TCG plugin that counts between the probe's window markers
        # (probe/plugin/opcount.c): built with the host's compiler beside the host's probe
        plugin = here / "probe" / f"{out}-count.so"
        if plugin.is_file():
            shutil.copy2(plugin, dest / "opcost-count.so")
        else:
            print("opcost: the counting plugin was not built (probe/plugin): installing without exact counts")
        src = dest / "src"
        shutil.rmtree(src, ignore_errors=True)
        for f in probe_sources(here / "probe"):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(here / "probe" / f, src / f)

    @staticmethod
    def _ship(path: Path, target: Path, arch: str) -> None:
        shutil.copy2(path, target)
        os.chmod(target, 0o755)

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
                return here / "probe" / out, [f"CC={cc}"]
        print("opcost: no i386 compiler (apt-get install gcc-i686-linux-gnu): installing without the i386 probe")
        return None


    @staticmethod
    def _try_arm(here):
        """The arm (armv7 hard-float) probe for seed 004's boards, with the
        Debian cross compiler when it is here (it runs under qemu-arm on this
        machine); one line either way, never fails the install."""
        cc = "arm-linux-gnueabihf-gcc"
        if not shutil.which(cc):
            print(f"opcost: no arm compiler (apt-get install gcc-arm-linux-gnueabihf): installing without the arm "
                  "probe (`opcost probe build --arch arm` builds it later)")
            return None
        out = "build/opcost-probe-arm"
        cp = subprocess.run(["make", "-C", str(here / "probe"), "-s", f"CC={cc}", f"OUT={out}"],
                            capture_output=True, text=True)
        if cp.returncode != 0 or arches.elf_arch(here / "probe" / out) != "arm":
            why = (cp.stderr.strip().splitlines() or ["not an arm binary"])[-1]
            print(f"opcost: building the arm probe with {cc} failed ({why}): installing without it")
            return None
        print(f"opcost: built the arm probe ({out}, {cc}; it runs under qemu-arm here)")
        return here / "probe" / out, [f"CC={cc}"]


def probe_sources(probe: Path) -> list[Path]:
    """What `make -C` needs to build the probe: the Makefile, *.c, *.h, *.S."""
    patterns = ("*.c", "*.h", "*.S", "lib/*.[ch]", "bench/*.[ch]", "vminit/*.c", "plugin/*.[ch]")
    return [Path("Makefile")] + sorted(p.relative_to(probe) for pat in patterns
                                       for p in probe.glob(pat) if not p.name.endswith("-tiny.c"))  # generated


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


if __name__ == "__main__":   # setuptools runs it so; tests import it for shipped_arch
    setup(cmdclass={"build_py": BuildProbe}, distclass=BinaryDistribution)
