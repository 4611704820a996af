"""`opcost fleet run --hosts FILE|h1,h2 SPEC...`: one study on many hosts
over OpenSSH, each host's results stored labelled host=NAME; `opcost fleet
ab --hosts ... BENCH... --a P --b P`: `ab` on every host, each interleaving
its own arms, and one table across them (the host as the unit); `opcost
fleet variants --hosts ... SOURCE -D A -D B`: `variants` on every host,
built here for its architecture, and one table across them likewise."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import replace
from functools import partial
from pathlib import Path

from .. import formats, protocol
from ..console import warn
from ..errors import UsageError
from ..interrupts import Interrupted
from ..safetext import printable
from ..tables import format_fleet
from . import Parser, add_measure_options, add_notes_flag
from .ab import design, sequential_look, variant_pair
from .variants import add_build_options, check_mode_options, check_ops, one_cpu_each, with_mode_defaults

HOW = ("Per host: connect with your own ssh (BatchMode, host keys checked, your ~/.ssh/config, agent and "
       "ProxyJump), upload the static probe for its `uname -m` into a private temporary directory, ")
UNKNOWN = " A host whose key is not known is refused (exit 2) before any session is opened."


def _host_options(r) -> None:
    r.add_argument("--hosts", required=True, metavar="FILE|H1,H2",
                   help="a file of hosts (one a line, # comments) or a comma-separated list; a host is "
                   "NAME, user@NAME or an ssh_config alias")
    r.add_argument("--parallel-hosts", metavar="N", default=None,
                   help="measure at most N hosts at once (default: all)")
    r.add_argument("--ssh-config", metavar="FILE", default=None,
                   help="ssh's configuration file (ssh -F FILE; default: $OPCOST_SSH_CONFIG, else ssh's own: "
                   "~/.ssh/config)")


def add_parser(sub) -> None:
    s = sub.add_parser("fleet", help="run one study, one A/B or one variants study on many hosts over ssh "
                       "(results labelled host=NAME)")
    fs = s.add_subparsers(dest="fleet_command", metavar="ACTION", parser_class=Parser, required=True)
    r = fs.add_parser("run", help="measure SPECs on every host, with the protocol of `opcost run`",
                      description=HOW + "measure as `opcost run` does, store the run labelled host=NAME, remove "
                      "the upload." + UNKNOWN)
    r.add_argument("specs", nargs="*", metavar="SPEC")
    _host_options(r)
    add_measure_options(r, target=False)   # --hosts says where
    add_notes_flag(r)
    b = fs.add_parser("ab", help="`opcost ab` on every host, and one table across them (the host as the unit)",
                      description=HOW + "run `opcost ab` there (each host interleaves its own A and B), store "
                      "its run labelled host=NAME and fleet=ID, remove the upload; then one table: per host its "
                      "B/A, CI and verdict, and across hosts the geometric mean of the hosts' B/A with a "
                      "t-interval over their log ratios. The fleet's record is a run of kind fleet (`opcost "
                      "show` of it prints the table again)." + UNKNOWN)
    b.add_argument("benches", nargs="+", metavar="BENCH")
    b.add_argument("--a", required=True, metavar="PARAMS", help="variant A (the baseline)")
    b.add_argument("--b", required=True, metavar="PARAMS", help="variant B (verdicts are B relative to A)")
    protocol.add_delta(b)
    b.add_argument("--boundary", choices=protocol.BOUNDARIES, default=None, metavar="|".join(protocol.BOUNDARIES),
                   help="the sequential design's alpha spending on each host, as for `opcost ab`; not with -p")
    _host_options(b)
    add_measure_options(b, {"processes": None, "processes_help": "default: sequential on each host, looks after "
                            + ", ".join(map(str, protocol.SCHEDULE)) + "; N: exactly N, the fixed design"},
                        target=False)

    v = fs.add_parser("variants", help="`opcost variants` on every host (built here for its architecture), and "
                      "one table across them (the host as the unit)",
                      description=HOW + "upload there beside it the builds of SOURCE for that architecture (one "
                      "per -D, made here once per architecture: this machine's cc, or the cross compiler; a program "
                      "linked -static, the host's libc being unknown), measure them interleaved as `opcost "
                      "variants` does, store its run labelled host=NAME and fleet=ID, remove the upload; then one "
                      "table: per host each build against the first (B/A, CI, verdict), and across hosts the "
                      "geometric mean of the hosts' B/A with a t-interval over their log ratios. The hosts are "
                      "connected first (their `uname -m` says what to build); a build that cannot be made stops "
                      "the study before anything is measured. The fleet's record is a run of kind fleet." + UNKNOWN)
    add_build_options(v, arch=False, target=False)
    _host_options(v)


def _common(args) -> tuple[list[str], int, str | None]:
    """The hosts, how many at once, ssh's configuration: checked before anything is opened."""
    from .. import fleet   # --help must not load it

    hosts = fleet.parse_hosts(args.hosts)
    n = len(hosts)
    if args.parallel_hosts is not None:
        try:
            par = int(args.parallel_hosts)
        except ValueError:
            par = 0
        if par < 1:
            raise UsageError(f"--parallel-hosts {printable(args.parallel_hosts)} is not a whole number >= 1; "
                             "give e.g. --parallel-hosts 4")
    else:
        par = n
    ssh_config = args.ssh_config if args.ssh_config is not None else os.environ.get("OPCOST_SSH_CONFIG") or None
    if ssh_config is not None and not os.path.isfile(ssh_config):
        raise UsageError(f"--ssh-config {printable(ssh_config)}: no such file; give ssh's configuration file "
                         "(ssh -F FILE)")
    return hosts, par, ssh_config


def _ready(f) -> None:
    """ssh there, and every host's key known, before any session is opened."""

    for tool in ("ssh", "ssh-keygen"):
        if not shutil.which(tool):
            raise UsageError(f"{tool} not found: fleet uses your OpenSSH client; install it "
                             "(apt-get install openssh-client)")
    unknown = f.check_keys()
    if unknown:
        for e in unknown[:-1]:
            warn(str(e))
        raise unknown[-1]


def run(args, argv) -> int:
    if args.fleet_command == "ab":
        return run_ab(args, argv)
    if args.fleet_command == "variants":
        return run_variants(args, argv)
    from .. import fleet, session   # --help must not load it

    hosts, par, ssh_config = _common(args)
    n = len(hosts)
    settings = session.Settings.from_args(args, argv, "run")
    if "host" in settings.labels:
        raise UsageError("--label host=... is set by fleet run itself (the host's name); use another key")
    settings.check()
    if any(path == "-" for _, path in settings.exports) and n > 1:
        raise UsageError(f"--json -/--export ...:- with {n} hosts: give a file with {{host}} in its name")
    for _, path in settings.exports:
        fleet.host_exports([("json", path)], hosts[0], n)
    f = fleet.Fleet(hosts, args.specs, args.cpu, settings, ssh_config, par)
    _ready(f)
    f.run()
    from ..present import present_fleet, results_table   # --help must not load it

    return present_fleet(f, settings, partial(results_table, all_notes=args.notes))


def run_ab(args, argv) -> int:
    from .. import fleet, session   # --help must not load it

    hosts, par, ssh_config = _common(args)
    settings = session.Settings.from_args(args, argv, "ab")
    _one_document(settings)
    for bench in args.benches:
        if "," in bench or ":" in bench:
            raise UsageError(f"BENCH {bench!r} is a benchmark name; give its parameters with --a and --b")
    if len(set(args.benches)) != len(args.benches):
        raise UsageError("a benchmark is named twice; give each once")
    sequential = design(args, settings, len(args.benches))

    def variants_of(target) -> list:
        cpus = session.cpu_option(args.cpu, target)
        return [v for bench in args.benches for v in variant_pair(bench, args.a, args.b, cpus, target)]

    def look_of(host: str):
        return sequential_look(settings.stages, args.delta, say=lambda m: warn(f"{host}: {m}")) if sequential \
            else None

    f = fleet.Fleet(hosts, args.benches, args.cpu, settings, ssh_config, par, variants_of=variants_of,
                    look_of=look_of)
    _ready(f)
    return _measure_together(f, settings)


def _one_document(settings) -> None:
    """What `fleet ab` and `fleet variants` refuse in their settings: the
    labels they set themselves, a contradiction, a format that does not
    take their one fleet document."""

    for key in ("host", "fleet"):
        if key in settings.labels:
            raise UsageError(f"--label {key}=... is set by fleet {settings.kind} itself; use another key")
    if settings.no_store and settings.store:
        raise UsageError("--store and --no-store contradict each other; give one")
    formats.check(settings.exports, "fleet")


def _measure_together(f, settings) -> int:
    """The fleet's record opened, every host measured (each storing its own
    run labelled fleet=ID), the record closed; then the one document and
    table of the hosts' comparisons (comparison.fleet_document)."""

    from .. import fleet   # --help must not load it
    from ..comparison import fleet_document   # --help must not load it
    from ..present import present_fleet   # --help must not load it

    record, f.fleet_id = fleet.open_record(settings, f.hosts)
    f.run()
    record, lost = fleet.close_record(settings, record, f)
    rows = [{"host": h, "status": o.status, "reason": o.reason, "run_id": o.run_id, "document": o.document}
            for h, o in ((h, f.outcomes[h]) for h in f.hosts)]
    plan = replace(settings.plan, hosts=f.hosts, of=None if settings.kind == "ab" else settings.kind)
    doc = fleet_document(rows, plan=plan, run_id=record, fleet_id=f.fleet_id)
    return present_fleet(f, settings, format_fleet, doc=doc, record_lost=lost)


def run_variants(args, argv) -> int:
    from .. import fleet, session, variantbuild, variantcache   # --help must not load it

    hosts, par, ssh_config = _common(args)
    source = variantbuild.check_source(args.source)
    defines = variantbuild.check_defines(args.defines)
    ops = check_ops(args)
    cc = variantbuild.check_compiler(args.cc) if args.cc is not None else None
    cflags = variantbuild.join_cflags(args.cflags)
    extra_flags = variantbuild.variant_flags(args.cflags_for, defines)
    given = {k: getattr(args, k) for k in ("samples", "warmup", "target_ms")}
    if args.mode == "program":
        check_mode_options("program", args, given)
    settings = session.Settings.from_args(args, argv, "variants", samples=given["samples"] or 1,
                                          warmup=given["warmup"] or 0)
    _one_document(settings)
    settings.check()
    session.check_verdict_on_asked(getattr(args, "verdict_on", None), settings.counters)
    if args.cpu is not None:
        one_cpu_each(args.cpu, args.cpu.split("|"))
    builds: dict[str, variantbuild.Build] = {}

    def variants_of(target) -> list:
        cpus = session.cpu_option(args.cpu, target) or [str(target.default_cpu())]
        one_cpu_each(args.cpu, cpus)
        out = on_cpus(builds[target.host_arch()].variants, cpus)
        target.upload_builds(list(dict.fromkeys(v.exe or v.program[-1] for v in out)))
        return out

    f = fleet.Fleet(hosts, [str(source)], args.cpu, settings, ssh_config, par, variants_of=variants_of)
    _ready(f)
    arches = f.connect_all()   # what each host is (uname -m): what to build for it
    try:
        if f.stopped is not None:   # Ctrl-C while connecting: nothing built, nothing measured
            raise Interrupted(f.stopped)
        compilers = {arch: compiler_for_hosts(arch, [h for h, a in arches.items() if a == arch], cc)
                     for arch in dict.fromkeys(arches.values())}
        with contextlib.ExitStack() as stack:
            cache = variantcache.Cache() if args.build_cache else None
            for arch, words in compilers.items():
                tmp = stack.enter_context(variantbuild.make_workdir())
                on = [h for h, a in arches.items() if a == arch]
                builds[arch] = variantbuild.build(
                    source=source, defines=defines, cc=words, cflags=cflags, mode=args.mode, workdir=Path(tmp),
                    cpus=["0"], arch=arch, ops=ops, log=warn, extra_flags=extra_flags, cache=cache,
                    remote=f"the {arch} host(s) {', '.join(on)}")
            if builds:
                mode = next(iter(builds.values())).mode
                check_mode_options(mode, args, given)
                with_mode_defaults(settings, mode, given)
            code = _measure_together(f, settings)
            for b in builds.values():
                b.store_in_cache()   # past every check: bad input never leaves a cached build
            return code
    except BaseException:
        f.close_all()   # refused (or interrupted) before measuring: every upload goes
        raise


def compiler_for_hosts(arch: str, hosts: list[str], cc: list[str] | None) -> list[str]:
    """The compiler of the builds for the hosts of `arch`: --cc when given
    (for this machine's architecture only), this machine's cc for its own
    architecture, else the Debian cross compiler (which package, if not
    installed)."""
    import shlex   # --help must not load it

    from .. import crossprobe, probe, variantbuild   # --help must not load it

    here = probe.host_arch()
    who = f"host {hosts[0]} is" if len(hosts) == 1 else f"hosts {', '.join(hosts)} are"
    if cc is not None:
        if arch != here:
            raise UsageError(f"--cc {shlex.join(cc)} builds for this machine ({here}) and {who} {arch}: leave "
                             "--cc out (each host's builds are made with the compiler for its architecture)")
        return cc
    try:
        words = crossprobe.default_cc(arch)
    except (UsageError, KeyError):
        pkg = crossprobe.cross_package(arch) if arch in probe.KNOWN_ARCHES else None
        raise UsageError(f"{who} {arch} and no compiler for {arch} is installed here: "
                         + (f"install {pkg} (apt-get install {pkg})" if pkg else
                            f"opcost builds for {', '.join(probe.KNOWN_ARCHES)}")) from None
    return variantbuild.check_compiler(shlex.join(words))


def on_cpus(variants: list, cpus: list[str]) -> list:
    """The builds (made for one CPU) on each CPU of a host, named after it
    when there are several (-DFAST cpu=1), as `variants` names them."""

    return [replace(v, cpu=c, name=f"{v.name} cpu={c}" if len(cpus) > 1 else v.name) for v in variants for c in cpus]
