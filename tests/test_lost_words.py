"""Issue 38's cosmetic items: the words said when a connection is lost.
A PostgreSQL server gone under an open store (its backend terminated, as
a crash or a shutdown does) is named as such, not "give a database that
user may write"."""

from __future__ import annotations

import pytest

from opcost.errors import StoreError
from opcost.store import open_store


def test_a_postgresql_connection_lost_mid_session_names_the_server(postgres_server):
    pg = postgres_server
    db = pg.new_database("gone")
    with open_store(pg.url(db)) as store:
        store.list_runs()
        pid = store._db.info.backend_pid
        pg.admin(f"SELECT pg_terminate_backend({pid})", db=db)
        with pytest.raises(StoreError) as e:
            store.list_runs()
    said = str(e.value)
    assert "lost its connection to the server (it shut down or crashed)" in said, said
    assert "start the server again" in said and "may write" not in said


def test_a_lost_ssh_connection_is_not_reported_as_ssh_exit_0(tmp_path):
    """The master's foreground ssh exits 0 once it has connected (it goes to
    the background); a loss later, with nothing in its log, is said as such."""
    import subprocess

    from opcost.targets.transport import SshTransport

    t = SshTransport("fleet9")
    t.master._proc = subprocess.Popen(["true"])
    t.master._proc.wait()
    t.master._log = tmp_path / "master.log"
    t.master._log.write_text("")
    said = str(t.lost(" while measuring"))
    assert "ssh exit 0" not in said and "its ssh connection ended without a message" in said, said
    t.master._log.write_text("Connection to 127.0.0.3 closed by remote host.\n")
    assert str(t.lost("")).endswith("Connection to 127.0.0.3 closed by remote host.")


def test_the_known_hosts_file_named_is_the_one_ssh_uses():
    from opcost.targets.transport import HostKeys

    name = HostKeys.known_hosts_file
    assert name({"userknownhostsfile": "~/.ssh/known_hosts ~/.ssh/known_hosts2"}) == "~/.ssh/known_hosts"
    assert name({"userknownhostsfile": "/etc/opcost/known_hosts"}) == "/etc/opcost/known_hosts"
    assert name({"userknownhostsfile": "~/k&h"}) == "~/'k&h'"     # quoted for the shell, ~ left to expand
    assert name({"userknownhostsfile": "none"}) == name({}) == "~/.ssh/known_hosts"
