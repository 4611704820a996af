"""Which accelerator and machine type a kernel boots with: as asked, or
`auto`'s answer (a short trial boot), remembered per kernel image, host and
QEMU in a small JSON cache; and, under TCG, the boot CPU's loops_per_jiffy
its first boot found (lpj=, given back to its next boots)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from typing import Callable

from ...errors import ProbeError, ProbeTimeout
from . import host
from .image import sha256_of
from .protocol import BootFailed
from .qemu import Machine, VmConfig, qemu_version

KVM_TRIAL_S = 10.0                           # --accel auto: a KVM boot that takes longer does not work here
MICROVM_TRIAL_S = {"tcg": 45.0, "kvm": 10.0}  # --vm-machine auto: a first microvm boot slower than this: pc


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opcost"


def read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def remember(path: Path, key: str, value: dict) -> None:
    """One answer added to a small JSON cache (written whole, atomically)."""
    known = read_json(path)
    known[key] = value
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1))
        os.replace(tmp, path)


class Choice:
    """The accelerator and machine type of each kernel in this run (--accel,
    --vm-machine, or auto's answers), and the facts they are keyed on: each
    kernel image's SHA-256 and QEMU's version."""

    def __init__(self, cfg: VmConfig, trial: Callable[[Machine, str, float], object]):
        self.cfg = cfg
        self.trial = trial   # trial(machine, accel, limit): a short boot running nothing, raising if it fails
        self._qemu_version: str | None = None
        self._sha: dict[Path, str] = {}
        self._accel: dict[str, tuple[str, str]] = {}       # sha -> (accel, why)
        self._machine: dict[tuple, tuple[str, str]] = {}   # (sha, accel) -> (machine type, why)
        self._lpj: dict[str, str] = {}                      # lpj cache key -> the kernel's lpj there

    def qemu_version(self) -> str | None:
        if self._qemu_version is None:
            self._qemu_version = qemu_version(self.cfg.qemu)
        return self._qemu_version

    def sha(self, kernel: Path) -> str:
        if kernel not in self._sha:
            self._sha[kernel] = sha256_of(kernel)
        return self._sha[kernel]

    def accel_for(self, m: Machine) -> tuple[str, str]:
        """(kvm|tcg, why) for this kernel: --accel as asked, or auto's answer
        (a short trial boot under KVM, remembered per image and host)."""
        if self.cfg.accel != "auto":
            return self.cfg.accel, "asked (--accel)"
        sha = self.sha(m.kernel)
        if sha in self._accel:
            return self._accel[sha]
        why = host.kvm_usable()
        if why:
            self._accel[sha] = ("tcg", why)
            return self._accel[sha]
        path = cache_dir() / "vm-accel.json"
        key = f"{sha}|{host.host_key(self.qemu_version())}"
        known = read_json(path)
        if key in known:
            self._accel[sha] = (known[key]["accel"], known[key]["why"] + " (remembered)")
            return self._accel[sha]
        try:
            self.trial(Machine(m.kernel, m.cmdline), "kvm", KVM_TRIAL_S)
            answer = ("kvm", "a trial boot under KVM reached the init")
        except (BootFailed, ProbeError, ProbeTimeout) as e:
            answer = ("tcg", f"a trial boot under KVM failed ({e})")
        remember(path, key, {"accel": answer[0], "why": answer[1]})
        self._accel[sha] = answer
        return answer

    def machine_for(self, m: Machine, accel: str) -> tuple[str | None, str]:
        """(microvm|pc, why) for this kernel under `accel`: --vm-machine as
        asked, or auto's remembered answer; (None, ...) when auto has not
        tried this kernel, host and accel yet (the next boot tries microvm)."""
        if self.cfg.machine != "auto":
            return self.cfg.machine, "asked (--vm-machine)"
        key = (self.sha(m.kernel), accel)
        if key not in self._machine:
            known = read_json(cache_dir() / "vm-machine.json").get(self._machine_key(m, accel))
            if not known:
                return None, "not tried yet"
            self._machine[key] = (known["machine"], known["why"] + " (remembered)")
        return self._machine[key]

    def _machine_key(self, m: Machine, accel: str) -> str:
        return f"{self.sha(m.kernel)}|{accel}|{host.host_key(self.qemu_version())}"

    def machine_found(self, m: Machine, accel: str, machine_type: str, why: str) -> None:
        self._machine[(self.sha(m.kernel), accel)] = (machine_type, why)
        remember(cache_dir() / "vm-machine.json", self._machine_key(m, accel), {"machine": machine_type, "why": why})

    def _lpj_key(self, m: Machine, accel: str, machine_type: str) -> str:
        return f"{self.sha(m.kernel)}|{accel}|{machine_type}|{host.host_key(self.qemu_version())}"

    def lpj_for(self, m: Machine, accel: str, machine_type: str) -> str:
        """`lpj=N` for a boot of this kernel under TCG once a boot of it on
        this machine type and host said its boot CPU's loops_per_jiffy (the
        init's facts), else "". The kernel then skips calibrating the delay
        loop on its other CPUs: a fifth of a second of a 2-vCPU boot under
        TCG, where each calibration waits on emulated timer ticks. The value
        is the one the kernel computes itself from the TSC's frequency (used
        by udelay() only: nothing opcost measures); a user's lpj= comes
        after it on the command line and wins. On microvm only, where the
        kernel is told the TSC's frequency (clock.machine_cmdline), so every
        boot computes the same value: on pc it calibrates the TSC against
        emulated timers, which on a loaded host was seen 3 times off."""
        if accel != "tcg" or machine_type != "microvm":
            return ""
        key = self._lpj_key(m, accel, machine_type)
        if key not in self._lpj:
            self._lpj[key] = str(read_json(cache_dir() / "vm-lpj.json").get(key, {}).get("lpj", ""))
        return f"lpj={self._lpj[key]}" if self._lpj[key].isdigit() else ""

    def lpj_found(self, m: Machine, accel: str, machine_type: str, facts: dict | None) -> None:
        """A boot's facts: its lpj remembered for the next boots (lpj_for);
        not when the user's own lpj= set it (other arms boot without it)."""
        lpj = str((facts or {}).get("lpj") or "")
        if accel != "tcg" or machine_type != "microvm" or not lpj.isdigit() or int(lpj) <= 0 or "lpj=" in m.cmdline:
            return
        key = self._lpj_key(m, accel, machine_type)
        if self._lpj.get(key) != lpj:
            self._lpj[key] = lpj
            remember(cache_dir() / "vm-lpj.json", key, {"lpj": lpj})
