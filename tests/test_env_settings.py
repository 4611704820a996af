"""Settings read from the environment (issue 26, item 6.10): a value that is
not a number of seconds was silently replaced by the default. Refused, one
line, exit 2, before anything is measured or stored."""

from __future__ import annotations

import pytest

FAST = ["--fake-clock", "100", "-p", "2", "-n", "1", "-w", "0", "--target-ms", "1", "--no-progress"]


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf", "1s"])
def test_bad_store_wait_is_refused_before_measuring(run_cli, tmp_path, value):
    cp = run_cli("run", "syscall.null", *FAST, env={"OPCOST_STORE_WAIT": value})
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.splitlines() == [f"opcost: OPCOST_STORE_WAIT={value}: give how many seconds a write waits "
                                      "for a store locked by another program, a number >= 0 (default 60)"]
    assert not (tmp_path / "opcost" / "opcost.db").exists()


@pytest.mark.parametrize("value", ["", "0", "2.5"])
def test_good_store_wait_is_taken(run_cli, value):
    cp = run_cli("run", "syscall.null", *FAST, env={"OPCOST_STORE_WAIT": value})
    assert cp.returncode == 0, cp.stderr
