"""Counting boots through a snapshot (targets/vm/restore.py, issue 39) with
the stand-in QEMU (fake_qemu.py): the first boot of a machine saves it while
the guest waits for its job, the next is restored from it with the same
QEMU arguments and -incoming defer, and a restore that fails or hangs falls
back to a fresh boot, recorded; the snapshots' directory is removed at the
end. The real boots (exact counts the same as a fresh boot's) are in
test_vm_boot.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from opcost.stats import restore_note
from opcost.targets.vm import supervise
from opcost.targets.vm.qemu import Machine, VmConfig
from opcost.targets.vm.restore import Snapshots
from conftest import ROOT
from test_vm import FAKE, fake_kernel


def test_saved_then_restored_and_a_failed_or_hung_restore_boots_fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_QEMU_ARGV", str(tmp_path / "argv.jsonl"))
    cfg = VmConfig(qemu=str(FAKE), cpus=1, accel="tcg", plugin="/no/opcost-count.so,out=/no/1.jsonl,blocks=on")
    m = Machine(fake_kernel(tmp_path / "k.bz"), "")
    snaps = Snapshots()

    def boot(limit: float = 20, out: str = "1"):
        c = VmConfig(**{**cfg.__dict__, "plugin": cfg.plugin.replace("1.jsonl", f"{out}.jsonl")})
        b = supervise.boot(c, m, [(["cpuid"], {})], accel="tcg", machine_type="pc", boot_limit=limit, timeout=30,
                           snaps=snaps)
        assert b.done and b.commands[0].status == 0 and b.commands[0].stdout, b   # the job ran
        return b

    first = boot()
    assert first.restore["way"] == "fresh" and first.restore["saved_s"] >= 0, first.restore
    (snap,) = snaps.made.values()
    assert Path(snap).read_bytes() == b"fake snapshot\n"
    again = boot(out="2")   # another plugin output file: the same machine
    assert again.restore["way"] == "restored", again.restore
    argvs = [json.loads(ln) for ln in (tmp_path / "argv.jsonl").read_text().splitlines()]
    assert argvs[1][-2:] == ["-incoming", "defer"] and "-incoming" not in argvs[0]
    strip = [[a for a in v if "fd" not in a and ".jsonl" not in a] for v in argvs]
    assert strip[1][:-2] == strip[0]   # the restore's QEMU: the saving one's arguments
    monkeypatch.setenv("FAKE_QEMU_RESTORE", "fail")
    failed = boot()
    assert failed.restore["way"] == "fresh" and "cannot load" in failed.restore["restore_failed"], failed.restore
    assert "saved_s" in failed.restore   # the snapshot made again
    monkeypatch.setenv("FAKE_QEMU_RESTORE", "hang")
    hung = boot(limit=2)
    assert hung.restore["way"] == "fresh" and "did not reach" in hung.restore["restore_failed"], hung.restore
    monkeypatch.delenv("FAKE_QEMU_RESTORE")
    assert boot().restore["way"] == "restored"
    where = snaps.directory()
    snaps.close()
    assert not where.exists()
    # the note: how many processes ran restored, and the last failure
    procs = [{"header": {"vm": {"restore": b.restore}}} for b in (first, again, failed, hung)]
    note = restore_note(procs)
    assert restore_note(procs[:1]) is None   # nothing restored, nothing failed: no note
    assert note["restored"] == 1 and note["restore_failed"] == 2 and "did not reach" in note["detail"], note


def test_interrupted_while_a_saved_guest_measures_leaves_no_snapshot_and_no_file(cli_environ, tmp_path):
    """SIGTERM while the boot that saved the snapshot measures (the stand-in
    stalls there): no QEMU left, and nothing in TMPDIR (the snapshots'
    directory, the counting plugin's files)."""
    from conftest import cli_argv
    from test_vm import FAST, _alive, _wait_for

    k = fake_kernel(tmp_path / "k")
    pids, tmp = tmp_path / "qemu.pids", tmp_path / "tmp"
    tmp.mkdir()
    env = cli_environ(OPCOST_QEMU=str(FAKE), FAKE_QEMU_MODE="stall", FAKE_QEMU_PIDFILE=str(pids), TMPDIR=str(tmp))
    proc = subprocess.Popen(cli_argv("run", "syscall.null", "--kernel", str(k), "-p", "3", "--counters",
                                     "instructions:k", *FAST), env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert _wait_for(lambda: any(tmp.glob("opcost-vmsnap-*/snap-*")), 30), "no snapshot saved"
        time.sleep(0.3)
        qemu = [int(x) for x in pids.read_text().split()]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read()
        assert _wait_for(lambda: not any(_alive(p) for p in qemu), 5), "a QEMU outlived opcost"
        assert list(tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_builds_keep_their_guest_names_whatever_the_rounds_order(tmp_path):
    """A round's requests come in its own order; each build is in the guest
    under one name in every round, so that a guest restored from the first
    round's snapshot has the builds a later round's job names."""
    from opcost import probe
    from opcost.targets.vm.initramfs import guest_files

    a, b, prog = tmp_path / "probe-a", tmp_path / "probe-b", tmp_path / "prog"
    reqs = [probe.ProbeRequest("opcost_op", {}, "x86_64", exe=str(a)),
            probe.ProbeRequest("opcost_op", {}, "x86_64", exe=str(b)),
            probe.ProbeRequest("prog", {}, "x86_64", program=(str(prog), "-x"))]
    runs, files = guest_files(reqs)
    assert guest_files(reqs[::-1])[1] == files == {"/opcost/build-1": a, "/opcost/build-2": b,
                                                   "/opcost/build-3": prog}   # by path
    assert [exe for _, exe in runs] == ["/opcost/build-1", "/opcost/build-2", None]
    assert runs[2][0].program == ("/opcost/build-3", "-x")


def test_a_snapshot_folder_left_by_a_run_killed_outright_is_removed_by_the_next(tmp_path, monkeypatch):
    # SIGKILL leaves a run's snapshots (50-70 MiB) behind: the next run that
    # makes its folder removes every folder whose lock no process holds, and
    # keeps those of runs still alive.
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = ("import sys, time; from opcost.targets.vm.restore import Snapshots; s = Snapshots(); "
            "d = s.directory(); (d / 'snap-0.qemu').write_bytes(b'x' * 4096); print(d, flush=True); "
            "time.sleep(60 if sys.argv[1] == 'live' else 0); import os; os.kill(os.getpid(), 9)")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    live = subprocess.Popen([sys.executable, "-c", code, "live"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        live_dir = Path(live.stdout.readline().strip())
        dead = subprocess.run([sys.executable, "-c", code, "dead"], capture_output=True, text=True, env=env,
                              timeout=60)
        assert dead.returncode == -signal.SIGKILL
        dead_dir = Path(dead.stdout.strip())
        assert dead_dir.is_dir() and live_dir.is_dir() and dead_dir.parent == tmp_path
        s = Snapshots()
        mine = s.directory()
        assert not dead_dir.exists() and live_dir.is_dir() and (live_dir / "snap-0.qemu").is_file()
        s.close()
        assert not mine.exists()
    finally:
        live.kill()
        live.wait()
