"""The xdist groups of tests/conftest.py take effect: under `-n 2 --dist
loadgroup` (test.sh) every test that uses the `fleet` fixture runs on one
worker, and so does every test of a module marked with a group, whatever
the pytest (with pytest 9.2 xdist's own way no longer did: pytest-xdist
issue 1386). Run on a tiny directory whose conftest takes the suite's hook."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")
HERE = Path(__file__).resolve().parent

CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(HERE)!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {str(HERE / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_collection_modifyitems = suite.pytest_collection_modifyitems
"""

TESTS = {
    "test_hosts.py": "import pytest\n@pytest.fixture\ndef fleet(): return 1\n"
                     "@pytest.mark.parametrize('i', range(6))\ndef test_h(fleet, i): pass\n",
    "test_corpus.py": "import pytest\npytestmark = pytest.mark.xdist_group('corpus')\n"
                      "@pytest.mark.parametrize('i', range(6))\ndef test_c(i): pass\n",
    "test_free.py": "import pytest\n@pytest.mark.parametrize('i', range(6))\ndef test_f(i): pass\n",
}


def test_groups_run_on_one_worker_each(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, text in TESTS.items():
        (tmp_path / name).write_text(text)
    cp = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                         "-v", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    ran = re.findall(r"\[(gw\d)\].* PASSED \S*?(test_\w+)\.py::\w+\[\d\](@[\w-]+)?", cp.stdout)
    assert len(ran) == 18, cp.stdout
    workers = {f: {w for w, g, _ in ran if g == f} for f in ("test_hosts", "test_corpus")}
    assert all(len(w) == 1 for w in workers.values()), workers
    assert {g for _, f, g in ran if f == "test_hosts"} == {"@sshd-hosts"}
    assert {g for _, f, g in ran if f == "test_corpus"} == {"@corpus"}
    assert {g for _, f, g in ran if f == "test_free"} == {""}
