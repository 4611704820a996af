"""Where the probe runs: a `Target` (base.py) answers everything opcost asks
of a machine (its benchmark table, CPUs, environment) and starts its probe
processes. local.py: this machine; ssh.py: a host reached with OpenSSH
(over transport.py, the connection); replay.py: scripted answers, no probe,
no subprocess (tests of the runner and the recorder).

`open_target(spec)` picks one from a spec, as store.open_store picks a store
from a URL: None or "local" is this machine, `ssh://[user@]host[:port]` a
host over SSH, and every other kind is one entry in TARGETS (its name, the
scheme of its specs, and an opener). A target that holds something (a
connection, an upload, a virtual machine) has `close()`; its opener passes
it to held(), and close_all() (cli.main, on every way out) closes it.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
from typing import Any, Callable

from ..errors import UsageError
from ..safetext import printable
from .base import Target
from .vm_options import from_args

__all__ = ["TARGETS", "FROM_ARGS", "Target", "open_target", "target_of", "close_all", "held", "local_target", "parse_ssh"]

# One opener per kind: opener(rest, **options) -> a Target ready to use (connected).
# `rest` is the spec after "NAME:" (for ssh://: after "ssh://"); `options` are the
# keyword arguments given to open_target (ssh_config=..., or a vm's kernel=...),
# each opener taking the ones it knows.
Opener = Callable[..., Target]

_SPEC = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)
_OPEN: list[Any] = []   # targets open_target opened that hold something: closed by close_all


def local_target() -> Target:
    """This machine (targets.local.LocalTarget), one per process, so its
    probe's table and CPU placements are asked once."""
    from .local import local_target   # --help must not load it

    return local_target()


def held(target):
    """An opener's target that holds something (a connection, an upload, a
    virtual machine): close_all() closes it. Returns it."""
    _OPEN.append(target)
    return target


def _open_local(rest: str, **options) -> Target:
    if rest:
        raise UsageError(f"--target local:{printable(rest)}: local takes nothing after it; give --target local")
    return local_target()


def parse_ssh(rest: str) -> tuple[str, int | None]:
    """`//[user@]host[:port]` (what follows "ssh:") -> (ssh's destination, port or None).
    UsageError (one line) for what is not such a host."""
    example = "give ssh://HOST, ssh://USER@HOST or ssh://HOST:PORT"
    if not rest.startswith("//"):
        raise UsageError(f"--target ssh:{printable(rest)}: {example}")
    dest = rest[2:]
    if dest.endswith("/"):
        dest = dest[:-1]
    if not dest or "/" in dest or "?" in dest or "#" in dest:
        raise UsageError(f"--target ssh:{printable(rest)}: not a host; {example}")
    port: int | None = None
    host_part = dest.rpartition("@")[2]
    if host_part.startswith("["):   # [IPv6]:port
        close = host_part.find("]")
        if close < 0:
            raise UsageError(f"--target ssh:{printable(rest)}: an unclosed '['; {example} (an IPv6 address "
                             "in brackets)")
        tail = host_part[close + 1:]
        if tail and not tail.startswith(":"):
            raise UsageError(f"--target ssh:{printable(rest)}: not a host; {example}")
        port_text = tail[1:] if tail else None
        name = host_part[1:close]
        dest = dest[:len(dest) - len(host_part)] + name
    elif host_part.count(":") > 1 and _ipv6(host_part):   # an IPv6 address without brackets: no port
        port_text = None
    elif host_part.count(":") > 1:   # HOST:PORT:PORT: which one would ssh use? neither is guessed
        raise UsageError(f"--target ssh:{printable(rest)}: a port given more than once; give ssh://HOST:PORT "
                         "with one port (an IPv6 address in brackets: ssh://[ADDRESS]:PORT)")
    elif ":" in host_part:
        name, _, port_text = host_part.rpartition(":")
        dest = dest[:len(dest) - len(host_part)] + name
    else:
        port_text = None
    if port_text is not None:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise UsageError(f"--target ssh:{printable(rest)}: port '{printable(port_text)}' is not a number "
                             "from 1 to 65535")
        port = int(port_text)
    user, at, host = dest.rpartition("@")
    if not host or (at and not user):
        raise UsageError(f"--target ssh:{printable(rest)}: no host name; {example}")
    from .transport import check_host   # --help must not load it

    return check_host(dest), port


def _ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def _open_ssh(rest: str, ssh_config: str | None = None, **options) -> Target:
    """ssh_config: ssh's -F FILE (default: $OPCOST_SSH_CONFIG, as for `fleet
    run`, else ssh's own ~/.ssh/config)."""

    from .ssh import SshTarget   # --help must not load it

    host, port = parse_ssh(rest)
    if ssh_config is None:
        ssh_config = os.environ.get("OPCOST_SSH_CONFIG") or None
        if ssh_config is not None and not os.path.isfile(ssh_config):
            raise UsageError(f"$OPCOST_SSH_CONFIG {printable(ssh_config)}: no such file; give ssh's "
                             "configuration file (ssh -F FILE), or unset it")
    # closed by close_all, also after a failed connect
    t = held(SshTarget(host, ssh_config, port=port, via=f"--target ssh:{rest}"))
    t.check_key()
    t.connect()
    return t


def _open_vm(rest: str, **options) -> Target:
    """vm:PATH[?cpus=N&mem=MiB&accel=kvm|tcg|auto&cmdline=ARGS]: a kernel booted in QEMU
    (targets/vm/, docs/kernels.md); `vm:` with the options of --kernel and the
    --vm-* options (vm_options.from_args: kernel=, cmdline=, cpus=, ...) gives the same."""
    from .vm.target import open_vm, open_vm_spec   # --help must not load it

    if not rest:
        return open_vm(**options)
    if options:
        raise UsageError(f"--target vm:{printable(rest)} and a kernel to boot (--kernel, kernel=, cmdline=) name two "
                         "targets; give one of them")
    return open_vm_spec("vm:" + rest)


# name -> (opener, the form of its specs, for the one line that lists them).
TARGETS: dict[str, tuple[Opener, str]] = {
    "local": (_open_local, "local (this machine, the default)"),
    "ssh": (_open_ssh, "ssh://[USER@]HOST[:PORT] (a host reached with OpenSSH, as `fleet run` does)"),
    "vm": (_open_vm, "vm:KERNEL[?cpus=N&mem=MiB&accel=kvm|tcg|auto&cmdline=ARGS] (a kernel booted in QEMU)"),
}


def _vm_from_args(args, texts) -> dict | None:
    return from_args(args, texts)


# name -> (reads a command line's options of that kind: the opener's options when they ask
# for such a target without --target, else None; what asks for it, for the one line that
# refuses two targets at once).
FROM_ARGS: dict[str, tuple[Callable[..., "dict | None"], str]] = {
    "vm": (_vm_from_args, "a kernel to boot (--kernel, kernel=, cmdline=)"),
}


def _supported() -> str:
    return "; ".join(form for _, form in TARGETS.values())


def target_of(args, texts: list | tuple = ()) -> Target:
    """The target a command line names, ready to use: `--target SPEC`, or the
    kind whose options ask for one (FROM_ARGS: a virtual machine for --kernel,
    or kernel=/cmdline= among `texts`, the SPECs, arms and --over), else this
    machine; each through open_target. Two of them at once: UsageError."""
    spec = getattr(args, "target", None)
    asked = [(name, what, opts) for name, (read, what) in FROM_ARGS.items() if (opts := read(args, texts)) is not None]
    if len(asked) > 1:
        raise UsageError(f"{' and '.join(w for _, w, _ in asked)} name two targets; give one of them")
    if not asked:
        return open_target(spec)
    name, what, opts = asked[0]
    if spec:
        raise UsageError(f"--target {printable(spec)} and {what} name two targets; give one of them")
    return open_target(f"{name}:", **opts)


def open_target(spec: str | None = None, **options) -> Target:
    """The target a spec names, ready to use: None or "local" (this machine),
    "ssh://[user@]host[:port]", or NAME:REST for any other entry of TARGETS.
    `options` go to the opener (ssh: ssh_config). UsageError (one line, exit
    2) for a spec that names no target; a target that cannot be reached
    raises its own error (ssh: HostLost, HostKeyUnknown)."""
    if spec is None:
        return local_target()
    text = spec.strip()
    if not text:
        raise UsageError(f"--target is empty; give one of: {_supported()}")
    m = _SPEC.match(text)
    name, rest = (m.group(1).lower(), m.group(2)) if m else (text.lower(), "")
    entry = TARGETS.get(name)
    if entry is None:
        raise UsageError(f"unknown target '{printable(spec)}'; give one of: {_supported()}")
    return entry[0](rest, **options)


def close_all() -> None:
    """Close every target open_target opened that holds something (a
    connection, an upload), the last first. cli.main calls it on every way
    out; safe to call twice."""
    while _OPEN:
        t = _OPEN.pop()
        try:
            t.close()
        except Exception:   # closing one must not keep the others open
            pass
