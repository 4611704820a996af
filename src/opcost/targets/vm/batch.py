"""The vm target's runs: one boot of a machine runs its batch of probe
processes, interleaved, and each comes back as the runner's process result."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ... import probe
from ...errors import ProbeError, ProbeTimeout, UsageError
from .initramfs import guest_files
from .protocol import BootFailed, Command
from .qemu import qemu_for
from .results import finish, pooled

if TYPE_CHECKING:
    from collections.abc import Callable

    from .protocol import Boot
    from .qemu import Machine, VmConfig


class VmBatch:
    """The part of VmTarget that runs the probe's processes in boots. Needs
    `cfg`, `machine_of`, `sha`, `_boot` and `_record` (VmTarget's)."""

    cfg: VmConfig
    _ksyms: dict[str, list]
    machine_of: Callable[[probe.ProbeRequest], Machine]
    sha: Callable[[Path], str]
    _boot: Callable[..., tuple[Boot, str, str]]
    _record: Callable[..., dict]

    def run_process(self, req: probe.ProbeRequest, timeout: float, on_line=None) -> probe.ProcessResult:
        (res,) = self.run_batch([req], timeout, on_line)
        if isinstance(res, Exception):
            raise res
        return res

    def run_batch(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        """One boot of the requests' machine (one machine: the runner groups
        them by batch_key): `opcost-probe cpuid`, then `--vm-procs` probe
        processes of each request, interleaved (A B A B...: drift within the
        boot spreads over them), each with its own seed and padding. Per
        request, a ProcessResult (its processes' samples pooled: the per-boot
        figure) or the ProbeError/ProbeTimeout/UsageError it ended with; a
        boot that fails fails them all (ProbeError: during a run that is the
        boot's failure, exit 1, its console kept)."""
        m = self.machine_of(reqs[0])
        per = max(1, self.cfg.procs)
        subs = [(ri, dataclasses.replace(r, seed=r.seed if j == 0 else r.seed * 7919 + j,
                                         pad_bytes=(r.pad_bytes + 1237 * j) % 4097))
                for j in range(per) for ri, r in enumerate(reqs)]
        results = [probe.ProcessResult(pad_bytes=r.pad_bytes) for _, r in subs]

        def on_frame(i: int, kind: str, text: bytes) -> None:
            if 1 <= i <= len(subs) and kind == "O" and text.strip():
                probe._accept(results[i - 1], text, on_line)

        runs, files = guest_files([r for _, r in subs])
        cmds: list[tuple] = [(["cpuid"], {})]
        # a counting boot: the probe waits for the init to have sent its last lines before each window
        quiet = {"OPCOST_QUIESCE": "1", "OPCOST_COUNTING": "1"} if reqs[0].emulated else {}
        cmds += [(g.argv(), {"OPCOST_PAD": "x" * r.pad_bytes, **quiet}, exe) for (_, r), (g, exe) in zip(subs, runs)]
        counting = None
        if reqs[0].emulated:   # a counting boot: the plugin in QEMU, the kernel's symbols from the init
            # only counting runs need the plugin's module (issue 34)
            from .counting import Counting, cached_offsets

            sha = self.sha(m.kernel)
            if sha not in self._ksyms:
                known = cached_offsets(sha)
                if known:
                    self._ksyms[sha] = known
            counting = Counting(full_symbols=sha not in self._ksyms)
            files = {**files, **counting.files()}
        try:
            b, accel, mt = self._boot(m, cmds, timeout, on_frame, what=f"{', '.join(r.bench for r in reqs)} on {m.kernel}",
                                      files=files, cfg=dataclasses.replace(self.cfg, plugin=counting.plugin)
                                      if counting else None)
        except BootFailed as e:
            if counting:
                counting.close()
            err: Exception = ProbeError(f"kernel {m.kernel} did not boot: {e}")
            return [err for _ in reqs]
        except (ProbeError, ProbeTimeout) as e:
            if counting:
                counting.close()
            return [e for _ in reqs]
        except json.JSONDecodeError as e:
            if counting:
                counting.close()
            return [ProbeError(f"probe printed a line that is not JSON in the guest: {e}") for _ in reqs]
        except BaseException:   # interrupted (Ctrl-C, SIGTERM): the plugin's files go too
            if counting:
                counting.close()
            raise
        cmd = b.commands + [Command() for _ in range(len(subs) + 1 - len(b.commands))]
        rec = self._record(m, b, accel, mt)
        with contextlib.suppress(ValueError, IndexError):
            rec["cpuid"] = json.loads(cmd[0].stdout[0])
        rec["processes_in_boot"] = len(subs)
        done: list[list] = [[] for _ in reqs]
        in_boot = []   # in the order the guest ran them
        for k, ((ri, r), res, c) in enumerate(zip(subs, results, cmd[1:])):
            in_boot.append(finish(r, res, c, dict(rec, position_in_boot=k), accel, qemu_for(self.cfg.qemu, m.arch)))
            done[ri].append(in_boot[-1])
        if counting:
            try:
                self._ksyms[self.sha(m.kernel)] = counting.into(b, [r for _, r in subs], in_boot, self.sha(m.kernel),
                                                                self._ksyms.get(self.sha(m.kernel), []),
                                                                qemu_for(self.cfg.qemu, m.arch), m.arch)
            finally:
                counting.close()
        return [pooled(parts) for parts in done]

    def run_concurrent(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        raise UsageError("--parallel is not supported on the vm target (one probe process per boot)")
