"""The lab the tests, the benchmarks and the demo share: throwaway network
namespaces (netlab), a small cluster in them (topology), an SSH fleet
(fleetlab), and what our policy looks like in each backend (policy_view).

Imported by name (``from ipmasq_lab import netlab``): scripts/bootstrap.sh
puts tests/lab on the venv's path (a ``.pth`` file), and
tests/integration/conftest.py puts the checkout's own tests/lab first, so a
test run always uses the lab of the tree it tests.
"""
import os

# The checkout this lab belongs to, and its integration tests' directory
# (playbooks, golden listings, peer_echo.py, callback plugins).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INTEGRATION = os.path.join(ROOT, 'tests', 'integration')
