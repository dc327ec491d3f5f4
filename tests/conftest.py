"""Shared pytest setup: make the collection importable as
ansible_collections.ipmasq.agent (scripts/bootstrap.sh builds the tree),
and the lab (tests/lab/ipmasq_lab) of this checkout, before the one the
venv's ipmasq_lab.pth names (worktrees may share one venv)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "build", "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
LAB = os.path.join(ROOT, "tests", "lab")
if LAB not in sys.path:
    sys.path.insert(0, LAB)


# tests/run-all.sh runs pytest in two parts: the tests of the files named in
# tests/checks-lane.txt (marked checks_lane) in the checks lane, beside the
# Molecule scenarios, and every other test once either lane has ended. `-m checks_lane`
# and `-m "not checks_lane"` together are every test, so a file renamed
# there only moves its tests to the second part (tests/unit/test_test_files.py
# holds the list to files that exist).
CHECKS_LANE_LIST = os.path.join(ROOT, "tests", "checks-lane.txt")


def checks_lane_files():
    """The entries of the checks_lane part (paths from the checkout's root):
    test files, and directories (ending in "/") for every test file below."""
    with open(CHECKS_LANE_LIST, encoding="utf-8") as f:
        lines = (line.split("#", 1)[0].strip() for line in f)
        return {line for line in lines if line}


def in_checks_lane(path, entries):
    """Whether the test file ``path`` (from the checkout's root) is one of
    ``entries`` or below one of its directories."""
    return path in entries or any(e.endswith("/") and path.startswith(e) for e in entries)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "checks_lane: run in the checks lane of tests/run-all.sh (tests/checks-lane.txt)")


def pytest_collection_modifyitems(config, items):
    files = checks_lane_files()
    for item in items:
        if in_checks_lane(os.path.relpath(str(item.path), ROOT), files):
            item.add_marker(pytest.mark.checks_lane)
