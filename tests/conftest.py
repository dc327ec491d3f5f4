"""Shared pytest setup: make the collection importable as
ansible_collections.ipmasq.agent (scripts/bootstrap.sh builds the tree),
and the lab (tests/lab/ipmasq_lab) of this checkout, before the one the
venv's ipmasq_lab.pth names (worktrees may share one venv)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "build", "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
LAB = os.path.join(ROOT, "tests", "lab")
if LAB not in sys.path:
    sys.path.insert(0, LAB)
