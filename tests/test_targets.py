"""targets.open_target: a spec picks where the probe runs, as a URL picks a
store (local, ssh://, one entry of TARGETS for any other kind); a spec that
names no target is one line, exit 2. The SSH target itself runs in
tests/test_fleet.py (real sshd hosts)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import cli_argv, cli_env
from opcost import targets
from opcost.errors import UsageError


def test_local_is_the_default_and_one_per_process():
    from opcost.targets.local import LocalTarget

    t = targets.open_target()
    assert isinstance(t, LocalTarget) and isinstance(t, targets.Target)
    assert targets.open_target("local") is t and targets.open_target("LOCAL") is t
    from opcost import session

    assert session.local_target() is t


@pytest.mark.parametrize("spec, dest, port", [
    ("//lab1", "lab1", None),
    ("//root@lab1.example", "root@lab1.example", None),
    ("//lab1:2222", "lab1", 2222),
    ("//me@10.0.0.7:22/", "me@10.0.0.7", 22),
    ("//[::1]:2200", "::1", 2200),
    ("//me@[fe80::1]", "me@fe80::1", None),
    ("//::1", "::1", None),              # an IPv6 address without brackets: no port (it was read as port 1)
    ("//me@fe80::1:2", "me@fe80::1:2", None),
])
def test_ssh_specs_parsed(spec, dest, port):
    assert targets.parse_ssh(spec) == (dest, port)


@pytest.mark.parametrize("spec, says", [
    ("ssh:lab1", r"give ssh://HOST, ssh://USER@HOST or ssh://HOST:PORT"),
    ("ssh://", r"not a host"),
    ("ssh://lab1/path", r"not a host"),
    ("ssh://lab1:0", r"port '0' is not a number from 1 to 65535"),
    ("ssh://lab1:x", r"port 'x' is not a number"),
    ("ssh://@lab1", r"no host name"),
    ("ssh://-oProxyCommand=x", r"starts with '-'"),
    ("ssh://[::1", r"unclosed '\['"),
    ("local:x", r"local takes nothing after it"),
    ("lab1", r"unknown target 'lab1'; give one of: local .*; ssh://\[USER@\]HOST\[:PORT\]"),
    ("nfs://x/y", r"unknown target 'nfs://x/y'"),
    ("   ", r"--target is empty; give one of"),
    ("a\nb", r"unknown target 'a\\nb'"),
])
def test_bad_specs_are_one_usage_line(spec, says):
    with pytest.raises(UsageError, match=says) as e:
        targets.open_target(spec)
    assert "\n" not in str(e.value)


def test_ssh_config_from_the_environment_checked(monkeypatch, tmp_path):
    """$OPCOST_SSH_CONFIG (as for `fleet run`) naming no file: one line, before any ssh."""
    monkeypatch.setenv("OPCOST_SSH_CONFIG", str(tmp_path / "nosuch"))
    with pytest.raises(UsageError, match=r"\$OPCOST_SSH_CONFIG .*nosuch: no such file"):
        targets.open_target("ssh://lab1")


def test_a_new_kind_is_one_entry(monkeypatch):
    """A virtual machine (or any other) target: one entry of TARGETS, its
    options passed through, closed by close_all when it holds something."""
    from opcost.targets.local import LocalTarget

    seen: dict = {}

    class Held(LocalTarget):
        name = "vm"
        closed = 0

        def close(self) -> None:
            Held.closed += 1

    def open_vm(rest: str, kernel: str | None = None, **options):
        seen.update(rest=rest, kernel=kernel)
        return targets.held(Held())

    monkeypatch.setitem(targets.TARGETS, "vm", (open_vm, "vm:NAME (a test)"))
    t = targets.open_target("vm:/boot/vmlinuz", kernel="bzImage")
    assert isinstance(t, Held) and seen == {"rest": "/boot/vmlinuz", "kernel": "bzImage"}
    with pytest.raises(UsageError, match=r"vm:NAME \(a test\)"):
        targets.open_target("nope")
    targets.close_all()
    targets.close_all()
    assert Held.closed == 1


def test_ssh_port_reaches_ssh():
    """ssh://HOST:PORT is ssh's -p: `ssh -G` (no network) resolves it."""
    import shutil

    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    from opcost.targets.transport import SshTransport

    t = SshTransport("lab1.invalid", port=2222)
    assert t.opts()[1:3] == ["-p", "2222"]
    assert t.resolved()["port"] == "2222"


@pytest.mark.parametrize("cmd", [["run", "syscall.null"], ["ab", "syscall.null", "--a", "", "--b", ""],
                                 ["series", "--run", "syscall.null", "--over", "cpu=0|0|0"]])
def test_bad_target_on_the_command_line(tmp_path, probe_bin, cmd):
    cp = subprocess.run(cli_argv(*cmd, "--target", "nfs://x", "--no-store", "--fake-clock", "100"),
                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.startswith("opcost: unknown target 'nfs://x'; give one of: local") and \
        cp.stderr.count("\n") == 1, cp.stderr


def test_fleet_has_no_target_option(tmp_path, probe_bin):
    cp = subprocess.run(cli_argv("fleet", "run", "--hosts", "a", "--target", "local", "syscall.null"),
                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and "--target" in cp.stderr


def test_a_wrapped_local_target_overrides_wrap_alone(tmp_path, probe_bin, monkeypatch):
    """A target that runs the probe here under something (nice, taskset, a
    container) subclasses LocalTarget and overrides `wrap` only: check,
    run_process and run_concurrent all start the probe through it."""
    from opcost import probe
    from opcost.protocol import Protocol
    from opcost.targets.local import LocalTarget

    monkeypatch.setenv("OPCOST_PROBE", str(probe_bin))
    log = tmp_path / "wrapped"

    class Logged(LocalTarget):
        name = "logged"

        def wrap(self, argv: list[str]) -> list[str]:
            return ["sh", "-c", f'echo "$1" >> {log}; shift; exec "$@"', "sh", argv[-1], *argv]

    t = Logged()
    req = probe.ProbeRequest("syscall.null", {}, t.host_arch(),
                             protocol=Protocol(samples=3, warmup=0, fake_clock=100.0), cpus=str(t.default_cpu()))
    assert t.check(req) is None
    assert t.run_process(req, 30).samples
    assert all(isinstance(r, probe.ProcessResult) for r in t.run_concurrent([req, req], 30))
    assert log.read_text().splitlines() == ["--check", *[req.argv()[-1]] * 3]   # one check, three processes
