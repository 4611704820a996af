"""Issue 17 item 2 (seed 001): counters compared between the arms of `ab`
and `compare`, named model-specific events resolved from the kernel's own
lists, and the helper's side counted (`:helper`).

This VM has no core PMU: the resolver is tested on fake sysfs trees built
here (an AMD-like and an Intel-like one, with the format strings those
kernels publish) and on `perf list --json` samples (tests/data/perf-list.md);
the counts end to end come from software events and the msr PMU, and a
hardware event must come back flagged `unsupported here`, not fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opcost import counters, pmu
from opcost.errors import UsageError

DATA = Path(__file__).with_name("data")
FAST = ["-n", "3", "-w", "1", "--target-ms", "2", "--no-store", "--no-progress"]
KNOWN = ["cycles", "instructions", "context-switches", "task-clock", "cpu-migrations", "page-faults"]

# The format strings the kernels publish: arch/x86/events/amd/core.c and intel/core.c.
AMD_FORMATS = {"event": "config:0-7,32-35", "umask": "config:8-15", "edge": "config:18", "inv": "config:23",
               "cmask": "config:24-31"}
INTEL_FORMATS = {"event": "config:0-7", "umask": "config:8-15", "edge": "config:18", "pc": "config:19",
                 "any": "config:21", "inv": "config:23", "cmask": "config:24-31", "in_tx": "config:32",
                 "in_tx_cp": "config:33", "offcore_rsp": "config1:0-63", "ldlat": "config1:0-15",
                 "frontend": "config1:0-23"}


def make_pmu(root: Path, name: str, type_: int, formats: dict, events: dict, cpus: str | None = None) -> None:
    d = root / name
    (d / "format").mkdir(parents=True)
    (d / "events").mkdir()
    (d / "type").write_text(f"{type_}\n")
    for k, v in formats.items():
        (d / "format" / k).write_text(v + "\n")
    for k, v in events.items():
        (d / "events" / k).write_text(v + "\n")
    if cpus is not None:
        (d / "cpus").write_text(cpus + "\n")


def amd_tree(root: Path) -> Path:
    make_pmu(root, "cpu", 4, AMD_FORMATS, {"cpu-cycles": "event=0x76", "instructions": "event=0xc0",
                                            "branch-misses": "event=0xc3"})
    make_pmu(root, "msr", 9, {"event": "config:0-63"}, {"tsc": "event=0x00", "smi": "event=0x04"})
    make_pmu(root, "software", 1, {}, {})
    make_pmu(root, "amd_l3", 11, {"event": "config:0-7", "umask": "config:8-15"}, {})
    return root


def intel_tree(root: Path) -> Path:
    make_pmu(root, "cpu", 4, INTEL_FORMATS, {
        "cpu-cycles": "event=0x3c", "mem-loads": "event=0xcd,umask=0x1,ldlat=3",
        "topdown-retiring": "event=0x00,umask=0x80", "topdown-retiring.scale": "5",
        "cycles-ct": "event=0x3c,in_tx=1,in_tx_cp=1"})
    return root


@pytest.fixture
def amd(tmp_path):
    return pmu.load_local(str(amd_tree(tmp_path / "amd")), str(DATA / "perf-list-amd-zen2.json"))


@pytest.fixture
def intel(tmp_path):
    return pmu.load_local(str(intel_tree(tmp_path / "intel")), str(DATA / "perf-list-intel-skylake.json"))


# ------------------------------------------------------------------ resolver


def test_format_strings_as_the_kernel_writes_them():
    f = pmu.parse_format("config:0-7,32-35")
    assert f.word == "config" and f.bits == tuple(range(8)) + (32, 33, 34, 35)
    assert pmu.parse_format("config1:0-63\n").bits == tuple(range(64))
    assert pmu.parse_format("config:18").bits == (18,)
    for bad in ("config:", "bogus:0-7", "config:0-64", "event=0x29"):
        with pytest.raises(ValueError):
            pmu.parse_format(bad)


@pytest.mark.parametrize("name,config,config1", [
    ("ls_dispatch.ld_dispatch", 0x129, 0),          # perf list: event=0x29,umask=1
    ("fp_ret_sse_avx_ops.all", 0xff03, 0),          # event=3,umask=0xff
    ("ex_ret_ucode_instr", 0x1000000c1, 0),         # event=0x1c1: bits 8-11 of the code go to config:32-35
    ("LS_DISPATCH.LD_DISPATCH", 0x129, 0),          # perf's names are case-insensitive
    ("cpu-cycles", 0x76, 0),                        # sysfs events/
    ("cpu/event=0x29,umask=1/", 0x129, 0),          # perf's own spelling, terms encoded with the formats
    ("cpu/event=0xc0,inv,cmask=1,edge/", 0x018400c0, 0),   # a bare term sets its bit
    ("cpu/ls_dispatch.store_dispatch/", 0x229, 0),
    ("cpu/config=0x1234/", 0x1234, 0),
])
def test_amd_names_resolve_to_the_attr_perf_would_open(amd, name, config, config1):
    r = amd.resolve(name)
    assert (r.pmu, r.type, r.config, r.config1) == ("cpu", 4, config, config1)


@pytest.mark.parametrize("name,config,config1", [
    ("uops_issued.any", 0x10e, 0),
    ("uops_issued.stall_cycles", 0x0180010e, 0),    # cmask=1 (24), inv (23), umask=1, event=0xe; period dropped
    ("offcore_response.demand_data_rd.any_response", 0x1b7, 0x10001),
    ("mem_trans_retired.load_latency_gt_4", 0x1cd, 0x4),
    ("frontend_retired.dsb_miss", 0x1c6, 0x11),
    ("mem-loads", 0x1cd, 3),                        # sysfs: ldlat goes to config1
    ("topdown-retiring", 0x8000, 0),                # the .scale file beside it is not an event
    ("cycles-ct", 0x30000003c, 0),
])
def test_intel_names_resolve_to_the_attr_perf_would_open(intel, name, config, config1):
    r = intel.resolve(name)
    assert (r.type, r.config, r.config1) == (4, config, config1)


def test_encoding_is_what_the_probe_takes(intel, amd):
    assert amd.resolve("ls_dispatch.ld_dispatch").encoding() == "@4:0x129"
    assert intel.resolve("offcore_response.demand_data_rd.any_response").encoding() == "@4:0x1b7:0x10001"
    assert amd.resolve("msr/tsc/").encoding() == "@9:0x0"
    assert "topdown-retiring.scale" not in intel.names()


def test_bad_terms_and_names_are_usage_errors(amd, intel):
    with pytest.raises(UsageError, match="does not fit the 8 bits"):
        amd.resolve("cpu/umask=0x100/")
    with pytest.raises(UsageError, match="'ldlat' is not a term of PMU cpu"):
        amd.resolve("cpu/event=0xcd,ldlat=3/")
    with pytest.raises(UsageError, match="no PMU named cpu_core here"):
        amd.resolve("cpu_core/event=0x3c/")
    with pytest.raises(UsageError, match="not a number"):
        amd.resolve("cpu/event=x/")
    assert amd.resolve("no_such.event") is None
    assert amd.resolve("cpu/no_such_event/") is None


def test_uncore_event_in_perf_list_says_why_it_cannot_count_a_thread(tmp_path):
    cat = pmu.load_local(str(amd_tree(tmp_path / "a")), str(DATA / "perf-list-amd-zen2.json"))
    r = cat.resolve("l3_request_g1.caching_l3_cache_accesses")   # amd_l3 is in this tree
    assert (r.pmu, r.type, r.config) == ("amd_l3", 11, 0x8001)
    bare = pmu.load_local(str(intel_tree(tmp_path / "i")), str(DATA / "perf-list-amd-zen2.json"))
    with pytest.raises(UsageError, match="PMU amd_l3, which this kernel does not expose"):
        bare.resolve("l3_request_g1.caching_l3_cache_accesses")


def test_hybrid_name_in_two_core_pmus_must_be_chosen(tmp_path):
    root = tmp_path / "hybrid"
    make_pmu(root, "cpu_core", 4, INTEL_FORMATS, {"mem-loads": "event=0xcd,umask=0x1,ldlat=3"}, cpus="0-7")
    make_pmu(root, "cpu_atom", 10, INTEL_FORMATS, {"mem-loads": "event=0xd0,umask=0x5,ldlat=3"}, cpus="8-15")
    cat = pmu.load_local(str(root), "")
    with pytest.raises(UsageError, match="cpu_atom/mem-loads/, cpu_core/mem-loads/"):
        cat.resolve("mem-loads")
    r = cat.resolve("cpu_atom/mem-loads/")
    assert (r.type, r.config, r.config1) == (10, 0x5d0, 3)
    assert "perf is not installed" in cat.summary()


def test_perf_list_sample_parses_only_openable_events():
    events = pmu.parse_perf_list((DATA / "perf-list-amd-zen2.json").read_text())
    names = {(e.pmu, e.name) for e in events}
    assert ("msr", "tsc") in names and ("cpu", "ls_dispatch.ld_dispatch") in names   # msr/tsc/ listed as pmu/name/
    assert not any("0.." in e.terms or e.name == "context-switches" for e in events)
    assert pmu.parse_perf_list("not json") == [] and pmu.parse_perf_list("{}") == []


def test_expand_resolves_names_only_when_it_must(amd):
    asked = []

    def catalog():
        asked.append(1)
        return amd

    plan = counters.expand("cycles,software", KNOWN, catalog=catalog)
    assert asked == [] and "@" not in plan.probe_list()
    plan = counters.expand("ls_dispatch.ld_dispatch:u,cpu/event=0x29,umask=2/,cycles,ex_ret_ucode_instr:helper",
                           KNOWN, catalog=catalog)
    assert asked == [1]
    assert plan.events == ["ls_dispatch.ld_dispatch:u", "cpu/event=0x29,umask=2/", "cycles", "ex_ret_ucode_instr:helper"]
    assert plan.probe_list() == ("ls_dispatch.ld_dispatch:u@4:0x129,cpu/event=0x29,umask=2/@4:0x229,cycles,"
                                 "ex_ret_ucode_instr:helper@4:0x1000000c1")
    assert plan.helper_events() == ["ex_ret_ucode_instr:helper"]


def test_unknown_name_gives_close_matches(amd):
    with pytest.raises(UsageError) as e:
        counters.expand("ls_dispatch.ld_dispach", KNOWN, catalog=lambda: amd)
    msg = str(e.value)
    assert "unknown counter or profile 'ls_dispatch.ld_dispach'" in msg
    assert "did you mean ls_dispatch.ld_dispatch" in msg and "\n" not in msg
    with pytest.raises(UsageError, match="did you mean .*context-switches"):
        counters.expand("context-switch", KNOWN, catalog=lambda: amd)


def test_helper_modifier_names_and_rows():
    plan = counters.expand("software:helper,context-switches:helper:k", KNOWN + ["cpu-clock"], catalog=None)
    assert "context-switches:helper" in plan.events and "context-switches:k:helper" in plan.events
    assert {d.name for d in plan.derived} == {"cpu_per_elapsed:helper"}
    assert counters.split_name("context-switches:k:helper") == ("context-switches (helper)", "k")
    assert counters.display_name("context-switches:helper") == "context-switches (helper)"
    for bad in ("cycles:helper:helper", "cycles:u:k", "cycles:h"):
        with pytest.raises(UsageError, match="modifier"):
            counters.expand(bad, KNOWN)


# ------------------------------------------------------------------ the ratio and its CI


def test_counter_ratio_uses_the_time_ratios_resampling():
    from opcost import abtest

    a, b = [10.0, 11.0, 9.5, 10.2, 10.8], [12.0, 12.5, 11.9, 13.0, 12.2]
    c = abtest.counter_ratio(a, b)
    r, ci = abtest.ratio_ci(a, b)
    assert c["ratio"] == pytest.approx(r) and c["ci95_ratio"] == pytest.approx(ci)
    assert c["differs"] is True and c["difference"] == pytest.approx(12.2 - 10.2)
    assert c["ci95_difference"][0] > 0
    same = abtest.counter_ratio([1.0] * 4, [1.0] * 4)
    assert same["ratio"] == 1.0 and same["ci95_ratio"] == [1.0, 1.0] and same["differs"] is False


def test_counter_ratio_with_zero_counts():
    from opcost import abtest

    none = abtest.counter_ratio([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert none["ratio"] is None and none["note"] == "zero in both arms" and none["differs"] is False
    new = abtest.counter_ratio([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert new["ratio"] is None and new["difference"] == 1.0 and new["differs"] is True
    # A's median is positive but some resamples of A are all zeros: the upper bound is unbounded
    some = abtest.counter_ratio([0.0, 0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert some["ratio"] == 1.0 and some["ci95_ratio"][1] is None
    with pytest.raises(ValueError):
        abtest.counter_ratio([-1.0], [1.0])


# ------------------------------------------------------------------ end to end


def test_ab_compares_software_counters_with_ratio_and_ci(run_cli, tmp_path):
    """syscall.null against itself with a known extra cost: task-clock per op
    grows with spin, context switches per syscall stay near 0 in both, and a
    hardware event is flagged unsupported (this VM), never an error."""
    out = tmp_path / "ab.json"
    cp = run_cli("ab", "syscall.null", "--a", "spin=0", "--b", "spin=0", "-p", "3", *FAST,
                 "--counters", "task-clock,context-switches,cycles", "--json", out, timeout=180)
    assert cp.returncode == 0, cp.stderr
    e = json.loads(out.read_text())["comparisons"][0]
    c = e["counters"]
    assert list(c) == ["task-clock", "context-switches", "cycles"]
    tc = c["task-clock"]
    assert tc["status"] == "ok" and tc["n_a"] == tc["n_b"] == 3 and tc["side"] == "measuring"
    assert tc["a"] > 0 and tc["ratio"] == pytest.approx(tc["b"] / tc["a"])
    assert tc["ci95_ratio"][0] <= tc["ratio"] <= tc["ci95_ratio"][1]
    assert "counters per op, B against A" in cp.stdout and "task-clock" in cp.stdout
    cyc = c["cycles"]
    if cyc["status"] == "unsupported":       # no PMU here: flagged, with the probe's reason
        assert cyc["a"] == cyc["b"] == "<not supported>" and "PMU" in cyc["reason"]
        counters_part = cp.stdout.split("counters per op, B against A", 1)[1]   # the savings table has a cycles row too
        line = next(ln for ln in counters_part.splitlines() if ln.strip().startswith("cycles "))
        assert "n/s" in line and "unsupported here" in line
        assert "cycles: unsupported here: no hardware PMU" in cp.stdout
    else:                                    # a machine with a PMU counts them
        assert cyc["status"] == "ok" and cyc["a"] > 0


def attempts(tries, attempt):
    """A statistical check on real timings: up to `tries` independent
    attempts, passing at the first that shows the property; with a
    per-attempt false failure p (stated at each use) the test fails falsely
    with probability p ** tries."""
    for _ in range(tries):
        ok, why = attempt()
        if ok:
            return
    pytest.fail(f"{tries} attempts, the last: {why}")


def test_ab_of_a_known_cost_shows_in_task_clock(run_cli, tmp_path):
    out = tmp_path / "ab.json"

    def attempt():
        cp = run_cli("ab", "syscall.null", "--a", "spin=0", "--b", "spin=400", "-p", "3", *FAST,
                     "--counters", "task-clock", "--json", out, timeout=180)
        assert cp.returncode == 0, cp.stderr
        tc = json.loads(out.read_text())["comparisons"][0]["counters"]["task-clock"]
        # 400 dependent adds (~130 ns at 3 GHz) on a ~100 ns syscall: task-clock per op must grow
        return tc["ratio"] > 1.2 and tc["ci95_ratio"][0] > 1.0 and tc["differs"] is True, tc
    # Real timings. False failure <= 1e-4: per attempt 0 of 20 failed here
    # (Intel Xeon, load average 6-7, half of them beside a CPU hog pinned on
    # the measuring CPU: ratio 2.4-3.8; 95% upper bound 0.139), and
    # 0.139 ** 5 = 5.2e-5.
    attempts(5, attempt)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_helper_side_counted_on_a_two_party_benchmark(run_cli, tmp_path, mode):
    """ctx.pipe on one CPU: every round trip switches the measuring side out
    once and the helper out once, so both count about 1 switch per op; the
    helper's task-clock is its own CPU time, not the measuring side's."""
    out = tmp_path / "r.json"
    cp = run_cli("run", f"ctx.pipe:mode={mode}", "-p", "2", *FAST, "--counters",
                 "context-switches,context-switches:helper,task-clock:helper", "--json", out, timeout=120)
    assert cp.returncode == 0, cp.stderr
    r = json.loads(out.read_text())["results"][0]
    c = r["summary"]["counters"]
    assert c["context-switches"] == pytest.approx(1.0, abs=0.2)
    assert c["context-switches:helper"] == pytest.approx(1.0, abs=0.2)
    assert 0 < c["task-clock:helper"] < r["summary"]["median_ns"]
    head = {x["name"]: x for x in r["processes"][0]["header"]["counters"]}
    assert head["context-switches:helper"]["helper"] is True and "helper" not in head["context-switches"]
    assert head["task-clock:helper"]["group"] == "context-switches:helper"    # the helper's own group
    assert "context-switches (helper)" in cp.stdout and "task-clock (helper)" in cp.stdout


def test_helper_counters_in_ab_are_their_own_rows(run_cli, tmp_path):
    out = tmp_path / "ab.json"
    cp = run_cli("ab", "ctx.pipe", "--a", "mode=thread", "--b", "mode=process", "-p", "2", *FAST,
                 "--counters", "context-switches:helper", "--json", out, timeout=180)
    assert cp.returncode == 0, cp.stderr
    c = json.loads(out.read_text())["comparisons"][0]["counters"]["context-switches:helper"]
    assert c["side"] == "helper" and c["status"] == "ok"
    assert c["a"] == pytest.approx(1.0, abs=0.2) and c["b"] == pytest.approx(1.0, abs=0.2)
    assert "context-switches (helper)" in cp.stdout


def test_helper_counter_on_a_benchmark_without_helper(run_cli):
    cp = run_cli("run", "syscall.null", "ctx.pipe", "-p", "1", *FAST, "--counters", "context-switches:helper")
    assert cp.returncode == 0, cp.stderr
    assert "context-switches:helper" not in cp.stdout            # shown as its row name
    assert "context-switches (helper): <not supported>: this benchmark has no helper" in cp.stdout
    alone = run_cli("run", "syscall.null", *FAST, "--counters", "context-switches:helper")
    assert alone.returncode == 2 and "has none; two-party benchmarks: " in alone.stderr


def test_named_event_from_a_fake_amd_sysfs_reaches_the_probe_as_its_attr(run_cli, tmp_path):
    """The whole path of a model-specific name with the AMD tree and perf
    list sample standing in for the machine's own: the probe opens type 4,
    config 0x129 (on a Zen 2 that counts loads; here, with no PMU, it is
    flagged unsupported with the reason)."""
    root = amd_tree(tmp_path / "sys")
    out = tmp_path / "r.json"
    cp = run_cli("run", "syscall.null", "-p", "1", *FAST, "--counters",
                 "ls_dispatch.ld_dispatch,ex_ret_ucode_instr:u,context-switches", "--json", out,
                 env={"OPCOST_PMU_SYSFS": str(root), "OPCOST_PERF_LIST": str(DATA / "perf-list-amd-zen2.json")})
    assert cp.returncode == 0, cp.stderr
    r = json.loads(out.read_text())["results"][0]
    head = {x["name"]: x for x in r["processes"][0]["header"]["counters"]}
    assert head["ls_dispatch.ld_dispatch"]["attr"] == {"type": 4, "config": "0x129"}
    assert head["ex_ret_ucode_instr:u"]["attr"] == {"type": 4, "config": "0x1000000c1"}
    if not Path("/sys/bus/event_source/devices/cpu").exists():
        assert head["ls_dispatch.ld_dispatch"]["status"] == "<not supported>"
        assert "no hardware PMU" in head["ls_dispatch.ld_dispatch"]["reason"]
        assert r["summary"]["counters"]["ls_dispatch.ld_dispatch"] == "<not supported>"
    assert isinstance(r["summary"]["counters"]["context-switches"], float)


@pytest.mark.skipif(not Path("/sys/bus/event_source/devices/msr/events/tsc").exists(),
                    reason="no msr PMU with a tsc event in sysfs here")
def test_real_sysfs_event_counts(run_cli, tmp_path):
    """The msr PMU's `tsc` is a real sysfs-named event this VM can count per
    thread: found by name, opened with the type the kernel gave the PMU."""
    out = tmp_path / "r.json"
    cp = run_cli("run", "syscall.null", "-p", "1", *FAST, "--counters", "msr/tsc/,tsc:u", "--json", out)
    assert cp.returncode == 0, cp.stderr
    r = json.loads(out.read_text())["results"][0]
    mtype = int(Path("/sys/bus/event_source/devices/msr/type").read_text())
    head = {x["name"]: x for x in r["processes"][0]["header"]["counters"]}
    assert head["msr/tsc/"]["attr"]["type"] == mtype and head["msr/tsc/"]["status"] == "ok"
    assert r["summary"]["counters"]["msr/tsc/"] > 0


def test_compare_of_stored_runs_compares_counters(run_cli):
    for label in ("k1", "k2"):
        cp = run_cli("run", "ctx.yield", "syscall.null", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "2",
                     "--no-progress", "--counters", "task-clock,context-switches:helper", "--label", label,
                     timeout=120)
        assert cp.returncode == 0, cp.stderr
    cp = run_cli("compare", "k1", "k2", "--json", "-")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    by = {e["bench"]: e for e in doc["comparisons"]}
    assert list(by["ctx.yield"]["counters"]) == ["task-clock", "context-switches:helper"]   # as asked, not sorted
    assert by["ctx.yield"]["counters"]["context-switches:helper"]["status"] == "ok"
    assert by["syscall.null"]["counters"]["context-switches:helper"]["status"] == "unsupported"
    assert "has no helper" in by["syscall.null"]["counters"]["context-switches:helper"]["reason"]


def test_variants_in_op_mode_compare_counters(run_cli, src, tmp_path):
    """`variants` shares the comparison: each build against the first, with
    its counters (here the thread's CPU time per call and its TSC ticks)."""
    path = src("#include <stdint.h>\n#ifdef SLOW\nstatic volatile uint64_t d = 7;\n#else\n#define d 7\n#endif\n"
               "uint64_t opcost_op(uint64_t x) { for (int k = 0; k < 8; k++) x = (x | 1ull << 63) / d + k; "
               "return x; }\n")
    out = tmp_path / "v.json"
    got = []

    def attempt():   # the builds come from the build cache after the first
        cp = run_cli("variants", path, "-D", "FAST", "-D", "SLOW", "-p", "3", "-n", "3", "--target-ms", "1",
                     "--counters", "task-clock,context-switches", "--json", out, "--no-store", "--no-progress",
                     timeout=240)
        assert cp.returncode == 0, cp.stderr
        (e,) = json.loads(out.read_text())["comparisons"]
        got[:] = [cp, e["counters"]["task-clock"]]
        return got[1]["ratio"] > 1.2, got[1]
    # Real timings (eight divides per call against multiplies: 3.5-4.5x here).
    # False failure <= 1e-4: the ratio was above 1.2 in 20 of 20 attempts of
    # the same comparison (test_variants' op mode, load average 6-17, half
    # beside a CPU hog; 95% upper bound 0.139), and 0.139 ** 5 = 5.2e-5.
    attempts(5, attempt)
    cp, tc = got
    assert tc["status"] == "ok" and tc["ci95_ratio"] is not None
    assert "counters per op, B against A" in cp.stdout
