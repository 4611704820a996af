"""`opcost fleet run --hosts FILE|h1,h2 SPEC...`: one study on many hosts
over OpenSSH, each host's results stored labelled host=NAME; `opcost fleet
ab --hosts ... BENCH... --a P --b P`: `ab` on every host, each interleaving
its own arms, and one table across them (the host as the unit)."""

from __future__ import annotations

import os

from .. import protocol
from ..errors import UsageError
from ..safetext import printable
from . import Parser, add_measure_options

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
    s = sub.add_parser("fleet", help="run one study, or one A/B, on many hosts over ssh (results labelled host=NAME)")
    fs = s.add_subparsers(dest="fleet_command", metavar="ACTION", parser_class=Parser, required=True)
    r = fs.add_parser("run", help="measure SPECs on every host, with the protocol of `opcost run`",
                      description=HOW + "measure as `opcost run` does, store the run labelled host=NAME, remove "
                      "the upload." + UNKNOWN)
    r.add_argument("specs", nargs="*", metavar="SPEC")
    _host_options(r)
    add_measure_options(r, target=False)   # --hosts says where
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


def _common(args) -> tuple[list[str], int, str | None]:
    """The hosts, how many at once, ssh's configuration: checked before anything is opened."""
    from .. import fleet

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
    import shutil

    from ..console import warn

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
    from .. import fleet, session

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
    from ..present import present_fleet, results_table

    return present_fleet(f, settings, results_table)


def run_ab(args, argv) -> int:
    from .. import fleet, formats, session
    from .ab import design, sequential_look, variant_pair

    hosts, par, ssh_config = _common(args)
    settings = session.Settings.from_args(args, argv, "ab")
    for key in ("host", "fleet"):
        if key in settings.labels:
            raise UsageError(f"--label {key}=... is set by fleet ab itself; use another key")
    if settings.no_store and settings.store:
        raise UsageError("--store and --no-store contradict each other; give one")
    formats.check(settings.exports, "fleet")
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
        from ..console import warn

        return sequential_look(settings.stages, args.delta, say=lambda m: warn(f"{host}: {m}")) if sequential \
            else None

    f = fleet.Fleet(hosts, args.benches, args.cpu, settings, ssh_config, par, variants_of=variants_of,
                    look_of=look_of)
    _ready(f)
    record, f.fleet_id = fleet.open_record(settings, hosts)
    f.run()
    record, lost = fleet.close_record(settings, record, f)
    from dataclasses import replace

    from ..comparison import fleet_document
    from ..present import present_fleet
    from ..tables import format_fleet

    rows = [{"host": h, "status": o.status, "reason": o.reason, "run_id": o.run_id, "document": o.document}
            for h, o in ((h, f.outcomes[h]) for h in hosts)]
    doc = fleet_document(rows, plan=replace(settings.plan, hosts=hosts), run_id=record, fleet_id=f.fleet_id)
    return present_fleet(f, settings, format_fleet, doc=doc, record_lost=lost)
