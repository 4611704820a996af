"""`opcost fleet run --hosts FILE|h1,h2 SPEC...`: one study on many hosts
over OpenSSH, each host's results stored labelled host=NAME."""

from __future__ import annotations

import os

from ..errors import UsageError
from ..safetext import printable
from . import Parser, add_measure_options


def add_parser(sub) -> None:
    s = sub.add_parser("fleet", help="run one study on many hosts over ssh (results labelled host=NAME)")
    fs = s.add_subparsers(dest="fleet_command", metavar="ACTION", parser_class=Parser, required=True)
    r = fs.add_parser("run", help="measure SPECs on every host, with the protocol of `opcost run`",
                      description="Per host: connect with your own ssh (BatchMode, host keys checked, your "
                      "~/.ssh/config, agent and ProxyJump), upload the static probe for its `uname -m` into a "
                      "private temporary directory, measure as `opcost run` does, store the run labelled "
                      "host=NAME, remove the upload. A host whose key is not known is refused (exit 2) "
                      "before any session is opened.")
    r.add_argument("specs", nargs="*", metavar="SPEC")
    r.add_argument("--hosts", required=True, metavar="FILE|H1,H2",
                   help="a file of hosts (one a line, # comments) or a comma-separated list; a host is "
                   "NAME, user@NAME or an ssh_config alias")
    r.add_argument("--parallel-hosts", metavar="N", default=None,
                   help="measure at most N hosts at once (default: all)")
    r.add_argument("--ssh-config", metavar="FILE", default=None,
                   help="ssh's configuration file (ssh -F FILE; default: $OPCOST_SSH_CONFIG, else ssh's own: "
                   "~/.ssh/config)")
    add_measure_options(r, target=False)   # --hosts says where


def run(args, argv) -> int:
    from .. import fleet, session
    from ..console import warn

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
    settings = session.Settings.from_args(args, argv, "run")
    if "host" in settings.labels:
        raise UsageError("--label host=... is set by fleet run itself (the host's name); use another key")
    settings.check()
    if any(path == "-" for _, path in settings.exports) and n > 1:
        raise UsageError(f"--json -/--export ...:- with {n} hosts: give a file with {{host}} in its name")
    for _, path in settings.exports:
        fleet.host_exports([("json", path)], hosts[0], n)
    import shutil

    for tool in ("ssh", "ssh-keygen"):
        if not shutil.which(tool):
            raise UsageError(f"{tool} not found: fleet run uses your OpenSSH client; install it "
                             "(apt-get install openssh-client)")
    f = fleet.Fleet(hosts, args.specs, args.cpu, settings, ssh_config, par)
    unknown = f.check_keys()
    if unknown:
        for e in unknown[:-1]:
            warn(str(e))
        raise unknown[-1]
    f.run()
    from ..present import present_fleet, results_table

    return present_fleet(f, settings, results_table)

