#!/usr/bin/env bash
# Every test of the collection. Run as root on Debian 12: installs what it
# needs first (scripts/bootstrap.sh), then
#   1. ansible-test sanity (ignore files empty),
#   2. ansible-lint, production profile,
#   3. pytest: unit tests, ansible-doc of every plugin, filters through
#      ansible-playbook, and the integration tests of the module against real
#      iptables (nf_tables and legacy) and real packets in network namespaces.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/bootstrap.sh
export PATH="$here/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$here/build/collections"

echo "== ansible-test sanity"
bash tests/sanity.sh

echo "== ansible-lint (production profile)"
ansible-lint --offline --profile production --strict

echo "== pytest"
pytest -n 2 -p no:cacheprovider tests "$@"
