"""Issue 25 item 1: the figure a process is reduced to leaves out the time
its measuring thread waited for the CPU (docs/statistics.md, "The figure:
time on the CPU"). Fabricated batches, so nothing here depends on this
CPU's timing: a benchmark that does not block gets its time on the CPU, one
that blocks wall time less the time lost waiting, an old document (no
run_ns, or a header that does not say whether the benchmark blocks) wall
time, and says so."""

from __future__ import annotations

import json
import subprocess

import pytest

from opcost import model, stats

WALL = 10_000_000     # one 10 ms batch
OPS = 100_000         # 100 ns per operation, quiet


def _sample(lost=0, *, run=None, delay=None, helper=None, cpu=0, with_sched=True):
    """A batch of OPS operations whose wall time is inflated by `lost` ns of
    waiting (the net time, ns_per_op, grows by as much)."""
    wall = WALL + lost
    s = {"iters": OPS, "ns_per_op": wall / OPS, "tsc_per_op": 2 * wall / OPS, "wall_ns": wall,
         "user_ns": 0, "sys_ns": wall, "nvcsw": 0, "nivcsw": 0, "cpu_before": cpu, "cpu_after": cpu}
    if with_sched:
        s["run_ns"] = WALL if run is None else run
        s["run_delay_ns"] = lost if delay is None else delay
    if helper is not None:
        s["helper"] = {"cpu": helper.pop("cpu", 1), "user_ns": 0, "sys_ns": 0, "nvcsw": 0, "nivcsw": 0, **helper}
    return s


def _proc(samples, blocks=False, cpus=(0,)):
    h = {"cpus": list(cpus)}
    if blocks is not None:
        h["blocks"] = blocks
    return {"header": h, "samples": samples}


def _contended(n=20, every=1, lost=WALL):
    """n batches, every `every`-th one losing `lost` ns (WALL: it took twice its time)."""
    return [_sample(lost if i % every == 0 else 0) for i in range(n)]


# --- which figure, by benchmark kind ---------------------------------------------

def test_a_benchmark_that_does_not_block_gets_its_time_on_the_cpu():
    assert model.figure_of([_sample()], {"blocks": False}) == model.FIGURE_CPU


def test_a_benchmark_that_blocks_gets_wall_time_less_the_waiting():
    assert model.figure_of([_sample()], {"blocks": True}) == model.FIGURE_LESS_WAITING
    # a helper makes it two-party (and blocking) whatever the header says
    assert model.figure_of([_sample(helper={"run_ns": WALL // 2, "run_delay_ns": 0})],
                           {"cpus": [0, 1]}) == model.FIGURE_LESS_WAITING


def test_without_run_delay_or_a_header_that_says_the_figure_is_wall_time():
    # an older probe, or a kernel without schedstat: no run_ns / run_delay_ns
    assert model.figure_of([_sample(with_sched=False)], {"blocks": False}) == model.FIGURE_WALL
    # a probe from before `blocks`: whether it blocks is unknown
    assert model.figure_of([_sample()], {"cpus": [0]}) == model.FIGURE_WALL
    assert model.figure_of([_sample()], None) == model.FIGURE_WALL
    # one batch without them is enough: one figure per process
    assert model.figure_of([_sample(), _sample(with_sched=False)], {"blocks": False}) == model.FIGURE_WALL


def test_the_probe_table_says_which_benchmarks_block(probe_bin):
    out = subprocess.run([str(probe_bin), "list", "--json"], capture_output=True, text=True, check=True).stdout
    blocks = {b["name"]: b["blocks"] for b in json.loads(out)["benchmarks"]}
    for name in ("syscall.null", "syscall.read", "signal.catch", "mem.pagefault", "insn.div", "xstate.xsave",
                 "epoll.wait"):
        assert blocks[name] is False, name
    for name in ("ctx.pipe", "ctx.yield", "proc.fork", "proc.exec", "thread.create", "msg.hackbench",
                 "timer.nanosleep"):
        assert blocks[name] is True, name
    # and the header of every run says it, so a stored process knows its figure
    hdr = subprocess.run([str(probe_bin), "run", "proc.fork", "--fake-clock", "100", "--samples", "1", "--warmup",
                          "0", "--target-ms", "1"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    assert json.loads(hdr)["blocks"] is True


# --- the figure of a contended process ----------------------------------------------

def test_contended_batches_inflate_wall_time_not_the_cpu_figure():
    # every other batch took twice its time: the thread waited half of it
    samples = [_sample(WALL if i % 2 else 0) for i in range(21)]
    clean = model.process_median(samples, {"blocks": False})
    assert clean == pytest.approx(WALL / OPS)                  # 100 ns: what it costs on the CPU
    assert model.process_median_wall(samples) == pytest.approx(WALL / OPS)   # median: 11 of 21 clean
    worse = [_sample(WALL) for _ in range(20)]                  # every batch waited as long as it ran
    assert model.process_median(worse, {"blocks": False}) == pytest.approx(100.0)
    assert model.process_median_wall(worse) == pytest.approx(200.0)


def test_steal_the_guest_accounts_is_left_out_too():
    # no run delay, but the thread ran 7 ms of the 10: the rest was stolen (paravirt steal accounting)
    s = _sample(0, run=7_000_000, delay=0)
    assert model.batch_off_cpu_ns(s) == pytest.approx(3_000_000)
    assert model.process_median([s], {"blocks": False}) == pytest.approx(70.0)


def test_time_on_the_cpu_keeps_the_overheads_subtracted_as_wall_time_does():
    # quiet: the thread's CPU time brackets the batch (run_ns > wall_ns by the
    # reads around it): nothing is taken off, the figure is ns_per_op exactly
    s = _sample(0, run=WALL + 3_000, delay=0)
    s["ns_per_op"] = 97.5   # loop and clock overhead subtracted by the probe
    assert model.batch_off_cpu_ns(s) == 0.0
    assert model.process_median([s], {"blocks": False}) == 97.5
    # waiting: the same subtraction, less the wait (not scaled: the overhead was on the CPU too)
    w = _sample(WALL)
    w["ns_per_op"] -= 2.5
    assert model.process_median([w], {"blocks": False}) == pytest.approx(97.5)


def test_two_party_benchmarks_leave_out_what_stats_counts_as_lost():
    # helper on a CPU of its own: both threads' run delay is lost
    s = _sample(3_000_000, delay=1_000_000, helper={"run_ns": WALL // 2, "run_delay_ns": 2_000_000})
    assert model.batch_lost_ns(s, False) == 3_000_000
    assert model.process_median([s], {"blocks": True, "cpus": [0, 1]}) == pytest.approx(100.0)
    # helper on the same CPU: what neither ran
    t = _sample(4_000_000, run=7_000_000, delay=0, helper={"cpu": 0, "run_ns": 7_000_000, "run_delay_ns": 0})
    assert model.batch_lost_ns(t, True) == 0.0   # both ran the whole 14 ms: nothing lost
    u = _sample(4_000_000, run=5_000_000, delay=0, helper={"cpu": 0, "run_ns": 5_000_000, "run_delay_ns": 0})
    assert model.batch_lost_ns(u, True) == 4_000_000
    assert model.process_median([u], {"blocks": True, "cpus": [0, 0]}) == pytest.approx(100.0)
    # without the header's cpus, where the helper ran says it shares the CPU
    assert model.process_median([u], None) == pytest.approx(100.0)


def test_a_blocking_benchmark_keeps_its_sleep():
    # a nanosleep-like batch: the thread ran 1 ms of 10, slept the rest, waited for nothing
    s = _sample(0, run=1_000_000, delay=0)
    assert model.process_median([s], {"blocks": True}) == pytest.approx(100.0)   # the sleep is the operation
    assert model.process_median([s], {"blocks": False}) == pytest.approx(10.0)   # what a CPU figure would say


# --- the summary --------------------------------------------------------------------

def test_the_summary_is_of_the_figure_with_wall_time_beside_it():
    procs = [_proc(_contended(every=1)) for _ in range(5)]
    s = stats.summarize(procs)
    assert s["figure"] == "cpu"
    assert s["median_ns"] == pytest.approx(100.0) and s["process_medians_ns"] == pytest.approx([100.0] * 5)
    assert s["median_wall_ns"] == pytest.approx(200.0)
    flag = next(f for f in s["flags"] if f["flag"] == "contended")
    assert flag["in_figure"] is False and "leaves it out" in flag["detail"]
    assert "includes that waiting" not in flag["detail"]


def test_an_old_document_keeps_the_wall_figure_and_says_so():
    old = [{"header": {"cpus": [0]}, "samples": [_sample(WALL, with_sched=False) for _ in range(5)]}
           for _ in range(3)]
    s = stats.summarize(old)
    assert s["figure"] == "wall" and s["median_ns"] == pytest.approx(200.0) == s["median_wall_ns"]
    # with run delay but a header from before `blocks`: wall too, and the flag says the figure includes it
    older = [_proc(_contended(), blocks=None) for _ in range(3)]
    s = stats.summarize(older)
    assert s["figure"] == "wall" and s["median_ns"] == pytest.approx(200.0)
    assert "the figure includes that waiting" in next(f for f in s["flags"] if f["flag"] == "contended")["detail"]
    # a stored summary without `figure` reads as wall time
    assert model.Summary({"median_ns": 1.0}).get("figure", "wall") == "wall"


def test_processes_of_different_figures_are_a_mixed_summary():
    s = stats.summarize([_proc([_sample()]), _proc([_sample(with_sched=False)])])
    assert s["figure"] == "mixed"


def test_every_consumer_reads_the_same_figure():
    procs = [dict(_proc(_contended(every=1)), round=i) for i in range(4)]
    r = {"processes": procs, "summary": None}
    assert model.process_medians(r) == pytest.approx([100.0] * 4)       # a run without its summary
    from opcost import comparison

    ra, ma, rb, mb = comparison.arms(procs, procs)    # what ab's verdict is computed on
    assert ra == [0, 1, 2, 3] and ma == pytest.approx([100.0] * 4) == mb
    assert stats.process_stats(procs[0]["samples"], procs[0]["header"])["median_ns"] == pytest.approx(100.0)


def test_fake_clock_figure_equals_wall(probe_bin):
    """The fake clock reports run_ns equal to wall time and no run delay, so
    the figure is the wall figure to the bit (the golden outputs stay)."""
    lines = subprocess.run([str(probe_bin), "run", "syscall.null", "--fake-clock", "100", "--samples", "5",
                            "--warmup", "0", "--target-ms", "1"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    docs = [json.loads(x) for x in lines]
    header = next(d for d in docs if d["type"] == "header")
    samples = [d for d in docs if d["type"] == "sample"]
    assert model.figure_of(samples, header) == "cpu"
    assert model.process_median(samples, header) == model.process_median_wall(samples)
