import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    """The qtransit command of the same source tree (QTRANSIT_CLI, or build/release's), for the
    tests that compare Python's results with the CLI's JSON. make test sets QTRANSIT_CLI; a missing
    command it names is a failure, not a skip."""
    named = os.environ.get("QTRANSIT_CLI")
    if named:
        assert os.access(named, os.X_OK), f"QTRANSIT_CLI={named}: not an executable"
        return named
    built = ROOT / "build" / "release" / "cli" / "qtransit"
    if built.exists():
        return str(built)
    found = shutil.which("qtransit")
    if not found:
        pytest.skip("no qtransit command to compare with (set QTRANSIT_CLI)")
    return found
