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
