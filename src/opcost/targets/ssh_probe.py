"""The probe on an ssh host (targets/ssh.py's): its command line there,
under a wrapper bound to its session (transport.BOUND: when the session ends
the wrapper kills the probe, and its helpers die with it by
PR_SET_PDEATHSIG); its answers as text or JSON; and what the host is (the
probe's table, CPUID and version, the CPUs allowed, the environment:
env.shell_script(), made from env's one list of sources), read in one
session."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from dataclasses import dataclass

from ..env import Marked, collect, shell_script
from ..errors import ProbeError, ProbeTimeout
from .transport import BOUND, COMMAND_TIMEOUT_S, SshTransport, last_line, remote_command

# The remote side of a probe process: $1 is the padding (OPCOST_PAD, the
# setup randomisation), the rest the probe's command line, killed when its
# session ends.
WRAPPER = "OPCOST_PAD=$1; export OPCOST_PAD; shift\n" + BOUND

# The probe's answers (table, CPUID, version), then the environment: one session.
_INFO = r'''m=$1; p=$2
printf '%sT\n' "$m"; "$p" list --json 2>/dev/null; t=$?
printf '\n%sI\n' "$m"; "$p" cpuid 2>/dev/null; i=$?
printf '\n%sV\n' "$m"; "$p" version 2>/dev/null; v=$?
printf '\n%sR %s %s %s\n' "$m" "$t" "$i" "$v"
'''


@dataclass
class HostFacts:
    """What the host is, as its probe and its files say."""
    table: dict
    cpuid: dict | None
    version: str | None
    cpus: list[int]
    env: dict


def text(ssh: SshTransport, probe: str, args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """The probe there (`probe`, its path) run with `args`: its stdout."""
    try:
        cp = ssh.run_held(ssh.argv(WRAPPER, "", probe, *args), timeout)
    except subprocess.TimeoutExpired:
        raise ProbeTimeout(f"{ssh.host}: probe {' '.join(args)} did not answer within {timeout:.0f} s") \
            from None
    if cp.returncode != 0:
        if not ssh.alive() or cp.returncode == 255:
            raise ssh.lost("")
        raise ProbeError(f"probe {' '.join(args)} failed on {ssh.host}: "
                         f"{last_line(cp.stderr) or f'exit {cp.returncode}'}")
    return cp.stdout


def as_json(ssh: SshTransport, probe: str, args: list[str]) -> dict:
    out = text(ssh, probe, args)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise ProbeError(f"probe {' '.join(args)} on {ssh.host} printed invalid JSON: {e}") from e


def read_host(ssh: SshTransport, probe: str, via: str) -> HostFacts:
    """The probe's table, CPUID and version and the host's environment, in one
    session (the table asked again alone when that session's answer fails:
    the probe's own message says why). `via`: how the user named the host."""
    mark = "@@opcost-" + secrets.token_hex(6) + "@@"
    out = Marked(ssh.run(remote_command(_INFO + shell_script(), mark, probe)), mark)
    sections = out.sections
    rcs = " ".join(sections.get("R", [])).split()   # the exit statuses of list, cpuid, version
    if len(rcs) != 3 or rcs[0] != "0":
        table = as_json(ssh, probe, ["list", "--json"])   # says why (its own message), or answers after all
    else:
        try:
            table = json.loads("\n".join(sections.get("T", [])))
        except json.JSONDecodeError as e:
            raise ProbeError(f"probe list on {ssh.host} printed invalid JSON: {e}") from e
    try:
        cpuid = json.loads("\n".join(sections.get("I", []))) if rcs[1:2] == ["0"] else None
    except json.JSONDecodeError:
        cpuid = None
    version = ("\n".join(sections.get("V", [])).strip() or None) if rcs[2:3] == ["0"] else None
    status = " ".join(sections.get("S", []))
    m = re.search(r"Cpus_allowed_list:\s*(\S+)", status)
    cpus = _cpu_list(m.group(1)) if m else _cpu_list(out.files.get("/sys/devices/system/cpu/online", "0"))
    info = {"probe_version": version, "compiler": version.split(" ", 3)[-1] if version else None}
    env = collect(cpuid, info, snapshot=out.snapshot(f"ssh {ssh.host}"))
    env["fleet_host"] = {"value": ssh.host, "source": via}
    return HostFacts(table, cpuid, version, cpus, env)


def placement(ssh: SshTransport, probe: str, a: int, b: int) -> str:
    """The probe's name for where CPUs a and b sit relative to each other."""
    try:
        return json.loads(text(ssh, probe, ["placement", str(a), str(b)]))["name"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ProbeError(f"probe placement on {ssh.host} printed an unexpected answer: {e}") from e


def _cpu_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        if a.strip().isdigit():
            out += list(range(int(a), int(b) + 1)) if b.strip().isdigit() else [int(a)]
    return sorted(set(out)) or [0]
