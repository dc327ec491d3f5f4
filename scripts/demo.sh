#!/usr/bin/env bash
# The first command of the README: builds a throwaway cluster in network
# namespaces (pod, node, an "external" host, a cluster-local host and a
# link-local host), runs ipmasq.agent.masq_chain in the node through
# ansible-playbook and shows with real packets who gets masqueraded.
# Nothing outside those namespaces is touched; they are removed on every exit.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: must be run as root (it creates network namespaces): sudo bash $0" >&2
  exit 1
fi
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/bootstrap.sh
exec .venv/bin/python scripts/demo.py "$@"
