"""Shared pytest setup: make the collection importable as
ansible_collections.ipmasq.agent (scripts/bootstrap.sh builds the tree)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "build", "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
