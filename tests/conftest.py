"""Shared fixtures: the probe built once per session, and `run_cli`, which runs
`python -m opcost ...` from the source tree against a private store."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pgserver import postgres_server  # noqa: F401  (the session's PostgreSQL server fixture)

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "probe" / "opcost-probe"

# Each `python -m opcost` a test starts (thousands in the suite) compiles the
# package from src/ unless its bytecode is cached: with PYTHONDONTWRITEBYTECODE
# set (as some shells and CI images do) that took some 85 ms of CPU per start, more
# than the interpreter's own start-up. The bytecode goes to build/pycache
# (git-ignored), never beside the sources; every process the tests start inherits this.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(ROOT / "build" / "pycache"))


# pytest-xdist (test.sh runs `-n auto --dist loadgroup`): the tests that share
# something one machine has once run in one group, so on one worker, one after
# the other: the fleet's sshd hosts (tests/sshd_hosts.py; test_fleet checks
# that no /tmp/opcost-fleet.* or ssh master of anyone's is left, machine-wide)
# and the real QEMU boots (tests/test_vm_boot.py: each looks for a QEMU of its
# kernel left behind, machine-wide; two TCG guests at once would also starve
# each other). Grouped by the fixture they use, so that a new test of either
# kind is grouped too; a module may add its own group (pytestmark).
XDIST_GROUP_BY_FIXTURE = {"fleet": "sshd-hosts", "fleet_up": "sshd-hosts", "kernel_pair": "qemu-boots",
                          "arm64_kernel": "qemu-boots"}


@pytest.hookimpl(tryfirst=True)   # before xdist's worker reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        groups = {g for f, g in XDIST_GROUP_BY_FIXTURE.items() if f in getattr(item, "fixturenames", ())}
        if len(groups) > 1:
            raise pytest.UsageError(f"{item.nodeid}: in two xdist groups {sorted(groups)}; give it one")
        if groups and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(groups.pop()))
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        _group_in_node_ids(items)


def _group_in_node_ids(items) -> None:
    """On an xdist worker with --dist loadgroup, xdist tells the controller a
    test's group by appending `@group` to its node id; from pytest 9.2 on its
    assignment (to the old `_nodeid`) no longer takes effect, node ids being
    structured (pytest-xdist issue 1386), and the groups would silently run on
    several workers at once. Appended here to the structured id (xdist still
    does it itself with an older pytest); refused where neither can be done."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        want = "@" + "_".join(names)
        if not names or item.nodeid.endswith(want) or not hasattr(item, "_id"):
            continue
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(item.nodeid + want)
        if not item.nodeid.endswith(want):
            raise pytest.UsageError(f"{item.nodeid}: its xdist group cannot be set with this pytest and "
                                    "pytest-xdist; run without -n (or with -n 0)")


# The session's tally of real boots (issue 39: 100 real boots under TCG in one session, no round lost).
# Every opcost process the tests start appends each boot the vm target asked for to OPCOST_VM_TALLY
# (targets/vm/supervise.tally); the controller (or the only process) sums the real QEMU's lines at the
# end, prints them in the terminal summary, and fails the session if a round was lost to a boot, or a
# preflight boot hung (a kernel that panics on purpose is bad input, not a loss).
def pytest_configure(config):
    if not hasattr(config, "workerinput"):   # xdist's workers inherit the controller's environment
        import tempfile

        fd, path = tempfile.mkstemp(prefix="opcost-vm-tally-", suffix=".jsonl")
        os.close(fd)
        os.environ["OPCOST_VM_TALLY"] = config._opcost_vm_tally = path


def _vm_tally(config) -> dict | None:
    import json

    path = getattr(config, "_opcost_vm_tally", None)
    if not path:
        return None
    try:
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    real = [r for r in rows if str(r.get("qemu", "")).startswith("qemu-system-")]
    lost = [r for r in real if r["lost"] and (r["stage"] == "run" or "did not reach opcost's init within"
                                               in (r.get("cause") or ""))]
    return {"asked": len(real), "boots": sum(1 + r["retried"] for r in real), "retried": sum(r["retried"] for r in real),
            "rounds": sum(1 for r in real if r["stage"] == "run"), "lost": lost,
            "failed_on_purpose": sum(1 for r in real if r["lost"]) - len(lost), "stand_in": len(rows) - len(real)}


def pytest_sessionfinish(session, exitstatus):
    t = _vm_tally(session.config)
    if t and t["lost"] and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    t = _vm_tally(config)
    if not t or not (t["asked"] or t["stand_in"]):
        return
    terminalreporter.write_sep("-", "vm boots (OPCOST_VM_TALLY)")
    terminalreporter.write_line(
        f"real QEMU: {t['boots']} boots ({t['rounds']} rounds' and {t['asked'] - t['rounds']} preflights'), "
        f"{t['retried']} hung and retried, {len(t['lost'])} lost, {t['failed_on_purpose']} failed on purpose "
        f"(a kernel that does not boot); stand-in QEMU: {t['stand_in']}")
    for r in t["lost"]:
        terminalreporter.write_line(f"LOST ({r['stage']}): {r['cause']}", red=True)


def pytest_unconfigure(config):
    path = getattr(config, "_opcost_vm_tally", None)
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


_INHERITED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _signals_left_as_found():
    """A blocked signal mask and SIG_IGN survive fork and exec: a test that left
    them in this worker (cli.main blocks and ignores the signals on its way out;
    tests call cli._main) would make every opcost this worker starts after it
    deaf to Ctrl-C and SIGTERM, and some later signal test fail for no reason
    of its own. Put back, and the test that did it fails here instead."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    handlers = {s: signal.getsignal(s) for s in _INHERITED}
    yield
    changed = signal.pthread_sigmask(signal.SIG_BLOCK, []) != mask or any(
        signal.getsignal(s) == signal.SIG_IGN and h != signal.SIG_IGN for s, h in handlers.items())
    if changed:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for s, h in handlers.items():
            if h is not None:
                signal.signal(s, h)
        pytest.fail("this test left signals blocked or ignored in the test process (call cli._main, not cli.main)")


@pytest.fixture(scope="session")
def probe_bin() -> Path:
    """`make -C probe` once per session; the path of the host probe."""
    cp = subprocess.run(["make", "-C", str(ROOT / "probe"), "-s"], capture_output=True, text=True)
    assert cp.returncode == 0, f"make -C probe failed:\n{cp.stdout}\n{cp.stderr}"
    assert PROBE.is_file() and os.access(PROBE, os.X_OK), f"{PROBE} was not built"
    return PROBE


def cli_env(data_home: Path, **extra: str) -> dict[str, str]:
    """The environment for one opcost process: the source tree on PYTHONPATH,
    XDG_DATA_HOME and XDG_CACHE_HOME under the test's tmp_path (never the
    real store or build cache), no inherited OPCOST_PROBE unless given here."""
    env = {k: v for k, v in os.environ.items() if k != "OPCOST_PROBE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    env["XDG_DATA_HOME"] = str(data_home)
    env["XDG_CACHE_HOME"] = str(data_home / "cache")   # variants' build cache: never the real one
    env.update(extra)
    return env


def on_tty(argv: list[str], env: dict, cwd: Path, timeout: float = 120) -> str:
    """Run `argv` with stdout on a pseudo-terminal (colour, width); its output.
    It must exit 0 (its stderr in the failure)."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=timeout)
    os.close(master)
    assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    return b"".join(chunks).decode()


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "opcost", *map(str, args)]


@pytest.fixture
def cli_environ(tmp_path, probe_bin):
    """cli_environ(**extra) -> env dict for a Popen of opcost."""
    return lambda **extra: cli_env(tmp_path, **extra)


@pytest.fixture
def run_cli(tmp_path, probe_bin):
    """run_cli(*args, env={...}, timeout=60, input=None) -> CompletedProcess
    (text mode) of `python -m opcost *args`, run in tmp_path with
    XDG_DATA_HOME=tmp_path; `env` adds or overrides variables."""
    def run(*args, env: dict | None = None, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(cli_argv(*args), env=cli_env(tmp_path, **(env or {})), cwd=tmp_path,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **kw)
    return run


@pytest.fixture
def src(tmp_path):
    """Write a source file for `opcost variants` into the test's directory."""
    def write(text: str, name: str = "t.c"):
        p = tmp_path / name
        p.write_text(text)
        return p
    return write


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A new, empty store of each backend: an SQLite file under tmp_path, or a
    new database on the session's PostgreSQL server (tests/pgserver.py; the
    password from PGPASSFILE), skipped where there is none."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'store.db'}"
    server = request.getfixturevalue("postgres_server")
    return server.url(server.new_database("s"))
