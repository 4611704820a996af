"""The vm target's preflight: each machine booted once before the run, every
request's check run there (and `opcost-probe cpuid`); check() answers from it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ... import probe
from ...errors import ProbeError, ProbeTimeout, UsageError
from .initramfs import guest_files
from .protocol import BootFailed, Command
from .qemu import Machine

if TYPE_CHECKING:
    from collections.abc import Callable

    from .protocol import Boot


class VmPreflight:
    """The part of VmTarget that checks requests in a preflight boot. Needs
    `_boot`, `_record`, `batch_key` and `machines` (VmTarget's)."""

    _checks: dict[tuple, Command]
    machines: dict[tuple, dict]
    _boot: Callable[..., tuple[Boot, str, str]]
    _record: Callable[..., dict]
    batch_key: Callable[[probe.ProbeRequest], tuple]

    def prepare(self, reqs: list[probe.ProbeRequest], begin: Callable[[], None] | None = None) -> None:
        """The preflight: each machine booted once, running every request's
        check there (and `opcost-probe cpuid`); check() then answers from it.
        A kernel that does not boot is bad input: BootFailed (exit 2), its
        console kept. `begin()`: called once the requests passed the checks
        made before any boot (batch_key: the kernel, its command line's
        length), before the first boot (the runner's import meanwhile)."""
        groups: dict[tuple, dict] = {}
        for r in reqs:
            ck = self._check_key(r)
            if ck not in self._checks:
                groups.setdefault(self.batch_key(r), {}).setdefault(ck, r)
        if begin is not None:
            begin()
        for (kernel, cmdline), pending in groups.items():
            m = Machine(kernel, cmdline)
            runs, files = guest_files(list(pending.values()))
            b, accel, mt = self._boot_checked(m, [(["cpuid"], {})] + [(g.argv(check=True), {}, exe)
                                                                     for g, exe in runs],
                                              f"preflight boot of {kernel}", files)
            cmds = b.commands + [Command() for _ in range(len(pending) + 1 - len(b.commands))]
            rec = self._record(m, b, accel, mt)
            with contextlib.suppress(ValueError, IndexError):
                rec["cpuid"] = json.loads(cmds[0].stdout[0])
            self.machines.setdefault((kernel, cmdline), rec)
            for ck, c in zip(pending, cmds[1:]):
                self._checks[ck] = c

    def _check_key(self, req: probe.ProbeRequest) -> tuple:
        """One preflight per machine and command (a build of `opcost variants`
        is its own command: its argv may be another build's)."""
        return (*self.batch_key(req), req.exe, req.program, tuple(req.argv(check=True)))

    def check(self, req: probe.ProbeRequest, timeout: float = 30) -> str | None:
        """Preflight in the guest: the machine boots (else BootFailed, exit 2,
        its console kept), the probe accepts the request there."""
        key = self._check_key(req)
        if key not in self._checks:
            self.prepare([req])
        chk = self._checks[key]
        last_err = (chk.stderr or [""])[-1].removeprefix("opcost-probe: ")
        if chk.status == probe.PROBE_EXIT_OK:
            return None
        if chk.status == probe.PROBE_EXIT_UNSUPPORTED:
            try:
                return json.loads(chk.stdout[0]).get("reason") or "unsupported in the guest"
            except (IndexError, ValueError):
                raise ProbeError(f"{req.bench}: probe said unsupported without a reason") from None
        if chk.status == probe.PROBE_EXIT_USAGE:
            raise UsageError(last_err or f"{req.bench}: probe rejected its arguments")
        raise ProbeError(f"{req.bench}: probe setup failed in the guest: {last_err or chk.status}")

    def _boot_checked(self, m: Machine, cmds, what: str, files: dict[str, Path] | None = None):
        try:
            return self._boot(m, cmds, 600.0, what=what, files=files, stage="preflight")
        except BootFailed as e:
            raise BootFailed(f"kernel {m.kernel} did not boot: {e}") from None
        except (ProbeTimeout, ProbeError) as e:   # a guest that hangs or prints garbage: bad input here too
            raise BootFailed(f"kernel {m.kernel}: {e}") from None
