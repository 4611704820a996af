"""`opcost fleet run` over OpenSSH against three "hosts": Debian's sshd on
127.0.0.2-4 (tests/sshd_hosts.py), with keys and known_hosts generated here.
Nothing leaves 127.0.0.0/8: the test ssh_config maps every other name to
127.0.0.5, where nothing listens.

What must hold (issue 16): a small study on all three; one host killed
mid-run (what was kept, what was reported, exit 1); no remote process or
file left after 20 runs, killed ones included (the hosts are this machine:
leftover upload directories, probe processes, wrappers, ssh masters);
host names, labels and parameters with `;`, `$(...)`, newlines or
`-oProxyCommand=` never reach a shell (a canary file is never created); an
unknown host key opens no session, exits 2 and prints the fingerprint.

sshd that cannot be started skips these tests, unless OPCOST_REQUIRE_SSHD=1
(test.sh) says they must run.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

import sshd_hosts
from conftest import cli_argv, cli_env

FAST = ["-p", "2", "-n", "5", "-w", "1", "--target-ms", "2"]


@pytest.fixture(scope="session")
def fleet(tmp_path_factory, probe_bin):
    d = tmp_path_factory.mktemp("fleet-hosts")
    hosts = sshd_hosts.start_or_skip(d)
    with open(hosts.ssh_config, "a") as f:   # any other name: loopback, nothing listening
        f.write("\nHost *\n  HostName 127.0.0.5\n  ConnectTimeout 5\n")
    yield hosts
    hosts.stop()


@pytest.fixture
def fleet_up(fleet):
    """The three hosts, each listening (a test before may have killed one)."""
    for h in fleet.hosts:
        fleet.restart(h)
    return fleet


def leftovers() -> dict[str, list[str]]:
    """What a fleet run may leave on a host (here: this machine) or locally:
    upload directories, local control directories, and processes: remote
    probes run from an upload, their wrappers, keepers, ssh clients and masters
    of ours."""
    files = glob.glob("/tmp/opcost-fleet.*") + glob.glob("/tmp/opcost-ssh-*")
    procs = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "opcost-fleet." in cmd or "opcost-ssh-" in cmd or "OPCOST_PAD=$1" in cmd:
            procs.append(f"{d}: {cmd[:200]}")
    return {"files": files, "processes": procs}


def settle(timeout: float = 10.0) -> dict[str, list[str]]:
    """Leftovers, once the hosts had a moment to notice closed sessions."""
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers()
        if not left["files"] and not left["processes"] or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def fleet_cli(fleet, tmp_path, *args, timeout: float = 240, **kw):
    return subprocess.run(cli_argv("fleet", "run", "--ssh-config", fleet.ssh_config, *args),
                          env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def runs(tmp_path) -> list[dict]:
    """Stored runs, with labels and process counts, via the CLI's JSON export."""
    db = tmp_path / "opcost" / "opcost.db"
    if not db.exists():
        return []
    cp = subprocess.run(cli_argv("history", "--json"), env=cli_env(tmp_path), cwd=tmp_path,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    import json

    return json.loads(cp.stdout)


def processes_of(tmp_path, run_id: int) -> int:
    con = sqlite3.connect(tmp_path / "opcost" / "opcost.db")
    try:
        return con.execute("SELECT COUNT(*) FROM processes p JOIN results r ON p.result_id = r.id "
                           "WHERE r.run_id = ?", (run_id,)).fetchone()[0]
    finally:
        con.close()


def test_study_on_three_hosts(fleet_up, tmp_path):
    cp = fleet_cli(fleet_up, tmp_path, "--hosts", "fleet1,fleet2,fleet3", "syscall.null", *FAST,
                   "--label", "kernel=test")
    assert cp.returncode == 0, cp.stderr
    for h in ("fleet1", "fleet2", "fleet3"):
        assert f"== {h} ==" in cp.stdout
        assert re.search(rf"opcost: {h}: stored as run \d+ \(host={h}\)", cp.stderr), cp.stderr
    got = runs(tmp_path)
    assert sorted(r["labels"]["host"] for r in got) == ["fleet1", "fleet2", "fleet3"]
    for r in got:
        assert r["labels"]["kernel"] == "test" and r["status"] == "complete"
        assert processes_of(tmp_path, r["id"]) == 2
    # the host's environment, collected there (a POSIX shell and the probe: no Python there)
    show = subprocess.run(cli_argv("show", str(got[0]["id"]), "--json", "-"), env=cli_env(tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert show.returncode == 0, show.stderr
    import json

    env = json.loads(show.stdout)["env"]
    assert env["fleet_host"]["value"] in ("fleet1", "fleet2", "fleet3")
    assert env["cpu_model_name"]["value"] and env["kernel_release"]["value"] == os.uname().release
    assert env["python_version"]["value"] is None
    assert env["probe_version"]["value"]
    series = subprocess.run(cli_argv("series", "syscall.null", "--by", "host"), env=cli_env(tmp_path),
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert series.returncode == 0, series.stderr
    for h in ("fleet1", "fleet2", "fleet3"):
        assert h in series.stdout
    assert settle() == {"files": [], "processes": []}


def _stored_processes(tmp_path, host: str) -> int:
    db = tmp_path / "opcost" / "opcost.db"
    if not db.exists():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    try:
        return con.execute("SELECT COUNT(*) FROM processes p JOIN results r ON p.result_id = r.id "
                           "JOIN run_labels l ON l.run_id = r.run_id WHERE l.key = 'host' AND l.value = ?",
                           (host,)).fetchone()[0]
    finally:
        con.close()


def until_stored(tmp_path, proc, host: str, timeout: float = 120) -> bool:
    """Wait until `host`'s run has stored a process (True), or `proc` ended or
    the time ran out (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if _stored_processes(tmp_path, host) >= 1:
                return True
        except sqlite3.Error:   # the store being created
            pass
        time.sleep(0.05)
    return False


def gone_from_the_hosts() -> dict:
    """After opcost was killed outright: wait (the master's ControlPersist and
    a margin) until no upload directory and no opcost process is left on the
    hosts, assert so, and return the leftovers (the local control directories)."""
    from opcost.targets.ssh import PERSIST_S

    deadline = time.monotonic() + PERSIST_S + 15
    while True:
        left = leftovers()
        remote = [f for f in left["files"] if "opcost-fleet." in f]
        if not remote and not left["processes"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert remote == [] and left["processes"] == [], left
    return left


def _kill_when_measuring(fleet, tmp_path, proc, host: str, timeout: float = 120) -> None:
    """Kill `host` (its sshd and every connection) once its run stored a process."""
    if not until_stored(tmp_path, proc, host, timeout):
        raise AssertionError(f"{host} never stored a process")
    next(h for h in fleet.hosts if h.name == host).kill()


def test_host_killed_mid_run(fleet_up, tmp_path):
    args = ["--hosts", "fleet1,fleet2,fleet3", "syscall.null", "-p", "8", "-n", "20", "-w", "1",
            "--target-ms", "30"]
    proc = subprocess.Popen(cli_argv("fleet", "run", "--ssh-config", fleet_up.ssh_config, *args),
                            env=cli_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        _kill_when_measuring(fleet_up, tmp_path, proc, "fleet2")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    lines = [ln for ln in err.splitlines() if ln.startswith("opcost: fleet2:")]
    assert len(lines) == 1 and "connection lost" in lines[0], err
    assert "ssh exit 0" not in lines[0], lines[0]     # issue 38: the loss is said, not the master's first exit
    kept = int(re.search(r"kept (\d+) process", lines[0]).group(1))
    assert kept >= 1
    assert re.search(r"opcost: fleet1: stored as run", err) and re.search(r"opcost: fleet3: stored as run", err)
    by_host = {r["labels"]["host"]: r for r in runs(tmp_path)}
    assert by_host["fleet2"]["status"] == "failed"
    assert processes_of(tmp_path, by_host["fleet2"]["id"]) == kept     # everything measured was kept
    assert processes_of(tmp_path, by_host["fleet1"]["id"]) == 8
    assert processes_of(tmp_path, by_host["fleet3"]["id"]) == 8
    assert settle() == {"files": [], "processes": []}


def _wait_for_handlers(pid: int, limit: float = 60.0) -> None:
    """Until the process catches SIGINT and SIGTERM (SigCgt in /proc): a signal
    sent while the interpreter itself is still starting (seconds under load)
    kills it before opcost's first line runs, which is Python's, not opcost's."""
    want = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            status = open(f"/proc/{pid}/status").read()
        except FileNotFoundError:
            return
        caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.M).group(1), 16)
        if caught & want == want:
            return
        time.sleep(0.02)


def test_no_leftovers_after_20_runs(fleet_up, tmp_path):
    """20 runs: finished ones, ones stopped by SIGINT or SIGTERM at various
    moments, and ones that lose a host. Nothing stays on any host."""
    hosts = "fleet1,fleet2,fleet3"
    small = ["syscall.null", "-p", "3", "-n", "10", "-w", "1", "--target-ms", "10"]
    endings = []
    for i in range(20):
        how = ("finish", "sigint", "sigterm", "host")[i % 4]
        for h in fleet_up.hosts:
            fleet_up.restart(h)
        proc = subprocess.Popen(cli_argv("fleet", "run", "--ssh-config", fleet_up.ssh_config, "--hosts", hosts,
                                         *small), env=cli_env(tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            if how in ("sigint", "sigterm"):
                _wait_for_handlers(proc.pid)
                time.sleep(1.0 + 0.5 * (i % 5))   # while connecting, uploading or measuring
                proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
            elif how == "host":
                time.sleep(2.0 + 0.5 * (i % 3))
                fleet_up.hosts[i % 3].kill()
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        endings.append((how, proc.returncode))
        assert "Traceback" not in err, err
        if how == "finish":
            assert proc.returncode == 0, err
        left = settle()
        assert left == {"files": [], "processes": []}, (i, how, left, err)
    assert {rc for how, rc in endings if how == "sigint"} <= {130, 0}
    assert {rc for how, rc in endings if how == "sigterm"} <= {143, 0}


CANARY_CASES = [
    # host names: refused before ssh (exit 2) or handed to ssh as a name after `--`
    (["--hosts", "fleet1;touch {canary}", "syscall.null"], 2),
    (["--hosts", "-oProxyCommand=touch {canary}", "syscall.null"], 2),
    (["--hosts", "fleet1,-oProxyCommand=touch${IFS}{canary}", "syscall.null"], 2),
    (["--hosts", "fleet1\ntouch {canary}", "syscall.null"], 2),
    # (ssh itself refuses these names: "hostname contains invalid characters")
    (["--hosts", "$(touch${IFS}{canary})", "syscall.null"], 2),
    (["--hosts", "fleet1;touch${IFS}{canary}", "syscall.null"], 2),
    (["--hosts", "`touch${IFS}{canary}`", "syscall.null"], 2),
    # labels: stored, never sent anywhere
    (["--hosts", "fleet1", "syscall.null", "--label", "note=$(touch {canary});`touch {canary}`"], 0),
    # parameters: quoted into the remote command line, the probe gets them verbatim: files with
    # these names exist in {dir}, so the benchmark runs (exit 0) on exactly that path
    (["--hosts", "fleet1", "syscall.stat:path={dir}/x;touch CANARY"], 0),
    (["--hosts", "fleet1", "syscall.stat:path={dir}/$(touch CANARY)"], 0),
    (["--hosts", "fleet1", "syscall.stat:path={dir}/-oProxyCommand=touch CANARY"], 0),
    (["--hosts", "fleet1", "syscall.stat:path={dir}/`touch CANARY`"], 0),
    (["--hosts", "fleet1", "syscall.stat:path={dir}/a\ntouch CANARY"], 2),
]


@pytest.mark.parametrize("case,want", CANARY_CASES, ids=[str(i) for i in range(len(CANARY_CASES))])
def test_nothing_reaches_a_shell(fleet_up, tmp_path, case, want):
    canary = tmp_path / "CANARY"
    files = tmp_path / "files"
    files.mkdir()
    for name in ("x;touch CANARY", "$(touch CANARY)", "-oProxyCommand=touch CANARY", "`touch CANARY`"):
        (files / name).write_text("")
    args = [a.replace("{canary}", str(canary)).replace("{dir}", str(files)) for a in case]
    cp = fleet_cli(fleet_up, tmp_path, *args, "-p", "1", "-n", "2", "-w", "0", "--target-ms", "1")
    # a shell anywhere would have made one: here (the cwd), in the remote home, or at /
    home = Path(os.path.expanduser("~"))
    assert not canary.exists() and not (home / "CANARY").exists() and not Path("/CANARY").exists(), cp.stderr
    assert not (files / "CANARY").exists()
    assert "Traceback" not in cp.stderr
    if want is not None:
        assert cp.returncode == want, cp.stderr
    else:
        assert cp.returncode in (0, 1), cp.stderr   # the path may not exist there: a failed variant
    if want == 0 and "path=" in args[-1]:
        import json

        doc = json.loads(subprocess.run(cli_argv("show", str(runs(tmp_path)[0]["id"]), "--json", "-"),
                                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                                        timeout=60).stdout)
        assert doc["results"][0]["params"]["path"] == args[-1].split("path=", 1)[1]   # verbatim
        assert doc["results"][0]["status"] == "ok"
    if want == 2:
        assert len([ln for ln in cp.stderr.splitlines() if ln.startswith("opcost:")]) == 1, cp.stderr
    assert settle() == {"files": [], "processes": []}


def test_unknown_host_key(fleet_up, tmp_path):
    log = fleet_up.hosts[0].log
    before = log.stat().st_size
    log2 = fleet_up.hosts[1].log
    before2 = log2.stat().st_size
    cp = fleet_cli(fleet_up, tmp_path, "--hosts", "fleet2,fleet-unknown", "syscall.null", *FAST)
    assert cp.returncode == 2, cp.stderr
    assert re.search(r"fleet-unknown: unknown host key \(ssh-ed25519 SHA256:[A-Za-z0-9+/]+\)", cp.stderr), cp.stderr
    assert "ssh-keyscan" in cp.stderr
    # issue 38: the file ssh reads for that host (its UserKnownHostsFile), not always ~/.ssh/known_hosts
    assert f">> {fleet_up.dir / 'known_hosts.empty'}" in cp.stderr, cp.stderr
    fp = subprocess.run(["ssh-keygen", "-lf", str(fleet_up.dir / "host_key.pub")], capture_output=True,
                        text=True).stdout.split()[1]
    assert fp in cp.stderr                       # the right fingerprint
    assert len(cp.stderr.strip().splitlines()) == 1

    def since(path: Path, size: int) -> str:   # bytes: an earlier line may not be UTF-8
        return path.read_bytes()[size:].decode(errors="replace")

    time.sleep(1.0)   # sshd logs what the connection did as it ends
    new = since(log, before)
    for auth in ("Accepted", "Postponed", "Starting session", "Failed", "Invalid user"):
        assert auth not in new, new
    # (the right fingerprint above shows the host was reached: its key was exchanged, then nothing)
    assert "Accepted" not in since(log2, before2)   # no session on the others either
    assert runs(tmp_path) == []
    assert settle() == {"files": [], "processes": []}


def test_unreachable_host_is_one_line(fleet_up, tmp_path):
    cp = fleet_cli(fleet_up, tmp_path, "--hosts", "fleet1,nosuchhost", "syscall.null", *FAST)
    assert cp.returncode == 1, cp.stderr
    bad = [ln for ln in cp.stderr.splitlines() if ln.startswith("opcost: nosuchhost:")]
    assert len(bad) == 1 and "cannot connect" in bad[0], cp.stderr
    assert re.search(r"opcost: fleet1: stored as run", cp.stderr)
    assert settle() == {"files": [], "processes": []}


def test_no_probe_for_the_arch(fleet_up, tmp_path, monkeypatch):
    """A host whose architecture has no probe: one line, nothing uploaded."""
    from opcost.errors import HostLost
    from opcost.targets.ssh import SshTarget

    t = SshTarget("fleet1", str(fleet_up.ssh_config))
    try:
        with pytest.raises(HostLost, match=r"no probe for its architecture"):
            t.connect(local_probe_for=lambda arch: None)
    finally:
        t.close()
    assert settle() == {"files": [], "processes": []}


def test_remote_probe_dies_with_its_session(fleet_up, tmp_path):
    """A probe whose session ends (its local ssh killed: as when the
    connection drops) is killed on the host by its wrapper."""
    import threading

    from opcost.probe import ProbeRequest
    from opcost.protocol import Protocol
    from opcost.targets.ssh import SshTarget

    t = SshTarget("fleet3", str(fleet_up.ssh_config))
    try:
        t.connect()
        proto = Protocol(samples=2000, warmup=0, target_ms=10, processes=1)
        req = ProbeRequest("syscall.null", {}, t.host_arch(), protocol=proto, cpus=str(t.default_cpu()), hold=True)
        err: list = []
        th = threading.Thread(target=lambda: err.append(_catch(t.run_process, req, 120)), daemon=True)
        th.start()
        deadline = time.monotonic() + 30
        probe = []
        while time.monotonic() < deadline and not probe:
            probe = [p for p in leftovers()["processes"] if "opcost-probe-" in p and "sh -c" not in p
                     and "ssh " not in p]
            time.sleep(0.1)
        assert probe, "the remote probe never started"
        t.cancel(signal.SIGINT)      # kills the local ssh of the session
        th.join(30)
        pid = int(probe[0].split(":")[0])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pid}"), "the remote probe outlived its session"
    finally:
        t.close()
    assert settle() == {"files": [], "processes": []}


def _catch(fn, *a):
    try:
        return fn(*a)
    except BaseException as e:   # noqa: BLE001 (the test looks at it)
        return e


def _target(fleet, host="fleet1"):
    from opcost.targets.ssh import SshTarget

    return SshTarget(host, str(fleet.ssh_config))


def test_upload_checked_without_sha256sum(fleet_up, monkeypatch):
    """A host without sha256sum: the upload is read back whole and checked here."""
    from opcost.targets import ssh_upload

    monkeypatch.setattr(ssh_upload, "_SUM", "echo no-sha256sum")
    t = _target(fleet_up)
    try:
        t.connect()
        assert t.benchmark_table()["benchmarks"]
    finally:
        t.close()
    assert t.closed_cleanly
    assert settle() == {"files": [], "processes": []}


@pytest.mark.parametrize("summer", ["sha256sum", "readback"])
def test_damaged_upload_is_refused(fleet_up, monkeypatch, summer):
    from opcost.errors import HostLost
    from opcost.targets import ssh_upload

    monkeypatch.setattr(ssh_upload, "_UPLOAD", 'umask 077\nhead -c 4096 > "$1"; cat >/dev/null; chmod 700 "$1"')
    if summer == "readback":
        monkeypatch.setattr(ssh_upload, "_SUM", "echo no-sha256sum")
    t = _target(fleet_up)
    try:
        with pytest.raises(HostLost, match=r"sha256 .* \(transfer damaged\); not run"):
            t.connect()
    finally:
        t.close()
    assert settle() == {"files": [], "processes": []}


def test_host_names_checked():
    from opcost.errors import UsageError
    from opcost.targets.ssh import check_host, remote_command

    for bad in ("-oProxyCommand=x", "a b", "a\nb", "a\tb", "", "a\x1bb"):
        with pytest.raises(UsageError):
            check_host(bad)
    assert check_host("root@lab-1.example") == "root@lab-1.example"
    # the remote command is one string of quoted words: sh -c SCRIPT sh ARG...
    import shlex

    assert shlex.split(remote_command("echo \"$1\"", "$(x);y\nz")) == ["sh", "-c", "echo \"$1\"", "sh", "$(x);y\nz"]


def test_sigkill_leaves_no_remote_process_or_file(fleet_up, tmp_path):
    """Even opcost killed with SIGKILL (no cleanup of its own): its sessions'
    stdin closes, so the hosts kill their probes and remove their uploads, and
    the masters end by themselves once no session is left (ControlPersist).
    What stays is local: the control directory with the master's log."""
    import shutil

    proc = subprocess.Popen(cli_argv("fleet", "run", "--ssh-config", fleet_up.ssh_config, "--hosts",
                                     "fleet1,fleet2,fleet3", "syscall.null", "-p", "8", "-n", "20", "-w", "1",
                                     "--target-ms", "30"), env=cli_env(tmp_path), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        _kill_when_measuring(fleet_up, tmp_path, proc, "fleet3")
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = gone_from_the_hosts()
    local = [f for f in left["files"] if "opcost-ssh-" in f]
    for d in local:
        assert set(os.listdir(d)) <= {"master.log"}, os.listdir(d)   # the socket is gone
        shutil.rmtree(d)


def _target_env(fleet, tmp_path) -> dict[str, str]:
    """The environment of an opcost whose --target ssh:// reads the test's
    ssh_config ($OPCOST_SSH_CONFIG, as `fleet run` does)."""
    return cli_env(tmp_path, OPCOST_SSH_CONFIG=str(fleet.ssh_config))


def test_run_with_target_ssh(fleet_up, tmp_path):
    """`opcost run --target ssh://HOST`: the fleet's target, opened by
    targets.open_target (the test's ssh_config from $OPCOST_SSH_CONFIG),
    measures there, stores the run with the host's environment, and
    closes: no upload, master or process left."""
    import json

    out = tmp_path / "r.json"
    cp = subprocess.run(cli_argv("run", "syscall.null", *FAST, "--target", "ssh://fleet2", "--json", out),
                        env=_target_env(fleet_up, tmp_path), cwd=tmp_path, capture_output=True, text=True,
                        timeout=240, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    assert re.search(r"stored as run 1", cp.stderr), cp.stderr
    doc = json.loads(out.read_text())
    assert doc["env"]["fleet_host"] == {"value": "fleet2", "source": "--target ssh://fleet2"}
    assert doc["env"]["python_version"]["value"] is None   # read by the shell there, not by this Python
    procs = doc["results"][0]["processes"]
    assert len(procs) == 2 and all(p["front_end"] == "ssh fleet2" for p in procs)
    assert settle() == {"files": [], "processes": []}
    # a host that is not there: one line, exit 1 (cannot connect), nothing left
    cp = subprocess.run(cli_argv("run", "syscall.null", *FAST, "--target", "ssh://nowhere"),
                        env=_target_env(fleet_up, tmp_path), cwd=tmp_path, capture_output=True, text=True,
                        timeout=240, stdin=subprocess.DEVNULL)
    assert cp.returncode != 0 and cp.stderr.startswith("opcost: nowhere: ") and cp.stderr.count("\n") == 1, \
        cp.stderr
    assert settle() == {"files": [], "processes": []}


def test_target_ssh_interrupted(fleet_up, tmp_path):
    """Ctrl-C while `ab --target ssh://HOST` measures: exit 130, what was
    measured is kept, and the host is left clean (probe, upload, master)."""
    proc = subprocess.Popen(cli_argv("ab", "syscall.null", "--a", "", "--b", "", "-p", "8", "-n", "20", "-w", "1",
                                     "--target-ms", "30", "--target", "ssh://fleet3", "--label", "host=fleet3"),
                            env=_target_env(fleet_up, tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        until_stored(tmp_path, proc, "fleet3")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted (SIGINT); everything measured so far was kept" in err, err
    assert settle() == {"files": [], "processes": []}


# --- `fleet ab` (issue 26, item 7): each host its own interleaved A/B, one table across them ----------

AB_FAST = ["-n", "5", "-w", "1", "--target-ms", "2", "--fake-clock", "100", "-p", "6"]


def fleet_ab(fleet, tmp_path, *args, timeout: float = 240):
    return subprocess.run(cli_argv("fleet", "ab", "--ssh-config", fleet.ssh_config, *args),
                          env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _cli(tmp_path, *args):
    return subprocess.run(cli_argv(*args), env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def _fleet_ab_checked(fleet, tmp_path, a: str, b: str) -> tuple[dict, subprocess.CompletedProcess]:
    """A fleet ab on the three hosts, its document, and what is stored: one
    ab run per host (labels host, fleet) and the fleet's record, which
    `show` and `report` print again as the run printed it."""
    import json

    out = tmp_path / "fleet.json"
    cp = fleet_ab(fleet, tmp_path, "--hosts", "fleet1,fleet2,fleet3", "syscall.null", "--a", a, "--b", b,
                  *AB_FAST, "--json", str(out), "--label", "kernel=test")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "opcost.fleet/1" and doc["kind"] == "ab"
    assert [h["host"] for h in doc["hosts"]] == ["fleet1", "fleet2", "fleet3"]
    got = runs(tmp_path)
    (record,) = [r for r in got if r["kind"] == "fleet"]
    hosts = [r for r in got if r["kind"] == "ab"]
    assert record["id"] == doc["run_id"] and record["status"] == "complete"
    assert record["labels"] == {"fleet": doc["fleet"], "kernel": "test"}
    assert sorted(r["labels"]["host"] for r in hosts) == ["fleet1", "fleet2", "fleet3"]
    for r in hosts:
        assert r["labels"]["fleet"] == doc["fleet"] and r["labels"]["kernel"] == "test"
        assert r["status"] == "complete" and processes_of(tmp_path, r["id"]) == 12   # 6 per arm, interleaved
    for h in doc["hosts"]:
        c = h["comparison"]
        assert h["status"] == "ok" and c["schema"] == "opcost.comparison/1" and c["interleaved"] is True
        assert c["a"]["run_id"] == h["run_id"]
        assert c["comparisons"][0]["a"]["params"]["spin"] == a.split("=")[1]
        assert c["comparisons"][0]["b"]["params"]["spin"] == b.split("=")[1]
    # shown again: show (table and JSON), report text; a format that does not take it is refused
    show = _cli(tmp_path, "show", str(doc["run_id"]))
    assert show.returncode == 0, show.stderr
    assert show.stdout.split("\n", 1)[1] == cp.stdout
    again = _cli(tmp_path, "show", str(doc["run_id"]), "--json", "-")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == doc
    rep = _cli(tmp_path, "report", str(doc["run_id"]), "-f", "text")
    assert rep.returncode == 0 and rep.stdout.rstrip("\n") == cp.stdout.rstrip("\n"), rep.stderr
    bad = _cli(tmp_path, "report", str(doc["run_id"]), "-f", "csv")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "fleet record" in bad.stderr, bad.stderr
    # each host's run is its own ab: show prints its comparison
    one = _cli(tmp_path, "show", str(doc["hosts"][0]["run_id"]))
    assert one.returncode == 0 and "A/B, interleaved" in one.stdout, one.stderr
    return doc, cp


def test_fleet_ab_aa_three_hosts(fleet_up, tmp_path):
    doc, cp = _fleet_ab_checked(fleet_up, tmp_path, "spin=1", "spin=1")
    for h in doc["hosts"]:
        assert h["comparison"]["aa"] is True
        assert h["comparison"]["comparisons"][0]["verdict"] not in ("slower", "faster")
    (x,) = doc["across"]
    assert x["n_hosts"] == 3 and x["counts"]["slower"] == 0 and x["counts"]["faster"] == 0
    # the fake clock makes the three hosts clones (the same figures each): the interval across
    # them has no width, and the verdict rests on the whole of it lying within +/- delta
    assert x["verdict"] in ("same", "negligible")
    lo, hi = x["ci95"]
    assert 0.98 <= lo <= x["geomean_ratio"] <= hi <= 1.02
    assert "syscall.null  across hosts" in cp.stdout
    assert settle() == {"files": [], "processes": []}


def test_fleet_ab_injected_cost_slower_everywhere(fleet_up, tmp_path):
    # the fake clock: A 100 ns + 1 tick, B 100 ns + 21 ticks (0.5 ns each): B/A = 110.5/100.5 on every host
    doc, cp = _fleet_ab_checked(fleet_up, tmp_path, "spin=1", "spin=21")
    for h in doc["hosts"]:
        e = h["comparison"]["comparisons"][0]
        assert e["verdict"] == "slower" and e["ratio"] == pytest.approx(110.5 / 100.5, rel=0.01)
    (x,) = doc["across"]
    assert x["n_hosts"] == 3 and x["counts"]["slower"] == 3 and x["verdict"] == "slower"
    assert x["geomean_ratio"] == pytest.approx(110.5 / 100.5, rel=0.01) and x["ci95"][0] > 1
    assert "syscall.null: slower on 3 of 3 hosts, geometric mean 1.1" in cp.stdout
    assert re.search(r"the fleet stored as run \d+ \(fleet=[0-9a-f]{12}\)", cp.stderr), cp.stderr
    # moved to another store (the record and its hosts' runs): shown there the same
    import json

    ids = [str(doc["run_id"])] + [str(h["run_id"]) for h in doc["hosts"]]
    moved = tmp_path / "moved.jsonl"
    assert _cli(tmp_path, "export", *ids, "-o", str(moved)).returncode == 0
    other = tmp_path / "other.db"
    imp = _cli(tmp_path, "import", "--store", str(other), str(moved))
    assert imp.returncode == 0, imp.stderr
    there = _cli(tmp_path, "show", "--store", str(other), str(doc["run_id"]), "--json", "-")
    assert there.returncode == 0, there.stderr
    back = json.loads(there.stdout)   # the hosts' runs may get other ids there
    assert back["across"] == doc["across"]
    assert [(h["host"], h["status"], h["comparison"]["comparisons"]) for h in back["hosts"]] == \
        [(h["host"], h["status"], h["comparison"]["comparisons"]) for h in doc["hosts"]]


def test_fleet_ab_one_host_lost_keeps_the_others(fleet_up, tmp_path):
    """A host that cannot be reached: one line, the others compared, the
    across-host figures over the two that were; exit 1; shown again the same."""
    import json

    out = tmp_path / "fleet.json"
    cp = fleet_ab(fleet_up, tmp_path, "--hosts", "fleet1,fleet2,nowhere", "syscall.null", "--a", "spin=1",
                  "--b", "spin=21", *AB_FAST, "--json", str(out))
    assert cp.returncode == 1, cp.stderr
    doc = json.loads(out.read_text())
    assert [h["status"] for h in doc["hosts"]] == ["ok", "ok", "failed"]
    (x,) = doc["across"]
    assert x["n_hosts"] == 2 and x["counts"]["slower"] == 2
    assert re.search(r"opcost: nowhere: failed", cp.stderr), cp.stderr
    again = _cli(tmp_path, "show", str(doc["run_id"]), "--json", "-")
    back = json.loads(again.stdout)
    assert back["across"] == doc["across"] and back["hosts"][2]["status"] == "missing"
    assert [r["status"] for r in runs(tmp_path) if r["kind"] == "fleet"] == ["failed"]


@pytest.mark.parametrize("args, want", [
    (["--label", "fleet=x"], "--label fleet=... is set by fleet ab itself"),
    (["--label", "host=x"], "--label host=... is set by fleet ab itself"),
    (["--export", "csv:x.csv"], "--export csv: this command writes a fleet document"),
    (["--boundary", "obf"], "--boundary obf is for the sequential design"),
    (["--a", "spin=1"], "a benchmark is named twice"),
])
def test_fleet_ab_bad_input(tmp_path, args, want):
    benches = ["syscall.null", "syscall.null"] if "twice" in want else ["syscall.null"]
    cp = subprocess.run(cli_argv("fleet", "ab", "--hosts", "fleet1", *benches, "--a", "", "--b", "",
                                 "-p", "6", *args),
                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    err = cp.stderr.splitlines()
    assert cp.returncode == 2 and len(err) == 1 and want in err[0] and "Traceback" not in cp.stderr, cp.stderr
    assert not (tmp_path / "opcost").exists() and not (tmp_path / "x.csv").exists()


def test_across_hosts_hand_computed():
    """The across-host statistics against values computed by hand: log
    ratios 0.01, 0.02, 0.03 have mean 0.02 and sd 0.01; t(0.975, 2) =
    4.302653, so the half-width is 0.0248414 and t = 3.4641 (p = 0.07418)."""
    import math

    from opcost.abtest import across_hosts

    x = across_hosts([0.01, 0.02, 0.03], delta=0.02)
    assert x["n_hosts"] == 3 and x["geomean_ratio"] == pytest.approx(math.exp(0.02))
    assert x["ci95"] == pytest.approx([math.exp(0.02 - 0.0248414), math.exp(0.02 + 0.0248414)], rel=1e-6)
    assert x["p_value"] == pytest.approx(0.07418, abs=1e-4)
    assert x["verdict"] == "inconclusive"   # not significant, and the CI reaches past +/- 2%
    tight = across_hosts([0.10, 0.101, 0.099])
    assert tight["verdict"] == "slower" and tight["ci95"][0] > 1.02
    same = across_hosts([0.001, -0.001, 0.0])
    assert same["verdict"] == "same"
    one = across_hosts([0.1])
    assert one["ci95"] is None and one["verdict"] == "inconclusive" and "two or more" in one["note"]


def test_fleet_ab_bad_bench_on_every_host_stores_nothing(fleet_up, tmp_path):
    """A benchmark no host has: a usage line per host, exit 2, and no run
    left in the store (the fleet's record, made before the hosts, is removed)."""
    cp = fleet_ab(fleet_up, tmp_path, "--hosts", "fleet1,fleet2", "nosuch.op", "--a", "", "--b", "", *AB_FAST)
    assert cp.returncode == 2, cp.stderr
    assert "Traceback" not in cp.stderr and "nosuch.op" in cp.stderr
    assert runs(tmp_path) == []
    assert "fleet stored as run" not in cp.stderr


def test_fleet_ab_sequential_on_each_host(fleet_up, tmp_path):
    """Without -p each host runs ab's sequential design: its own looks, its
    own stop; the design is in each host's comparison."""
    import json

    out = tmp_path / "fleet.json"
    cp = fleet_ab(fleet_up, tmp_path, "--hosts", "fleet1,fleet2", "syscall.null", "--a", "spin=1", "--b", "spin=21",
                  "-n", "5", "-w", "1", "--target-ms", "2", "--fake-clock", "100", "--json", str(out))
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    for h in doc["hosts"]:
        d = h["comparison"]["design"]
        assert d["kind"] == "sequential" and d["looks_done"] >= 1 and d["stopped"]["processes_per_arm"] >= 10
        assert h["comparison"]["comparisons"][0]["verdict"] == "slower"
    assert doc["across"][0]["verdict"] == "slower" and doc["across"][0]["counts"]["slower"] == 2


def test_fleet_ab_interrupted(fleet_up, tmp_path):
    """SIGINT while the hosts measure: exit 130, each host's run and the
    fleet's record kept as interrupted, the record shown again; nothing left
    on the hosts."""
    import json

    out = tmp_path / "fleet.json"
    proc = subprocess.Popen(cli_argv("fleet", "ab", "--ssh-config", fleet_up.ssh_config, "--hosts", "fleet1,fleet2",
                                     "syscall.null", "--a", "", "--b", "", "-p", "20", "-n", "20", "-w", "1",
                                     "--target-ms", "30", "--json", str(out)),
                            env=cli_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        until_stored(tmp_path, proc, "fleet1")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    got = runs(tmp_path)
    (record,) = [r for r in got if r["kind"] == "fleet"]
    assert record["status"] == "interrupted"
    assert {r["status"] for r in got if r["kind"] == "ab"} == {"interrupted"}
    doc = json.loads(out.read_text())
    assert {h["status"] for h in doc["hosts"]} == {"interrupted"} and doc["run_id"] == record["id"]
    show = _cli(tmp_path, "show", str(record["id"]))
    assert show.returncode == 0 and "across hosts" in show.stdout, show.stderr
    assert settle() == {"files": [], "processes": []}
