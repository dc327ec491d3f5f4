#!/usr/bin/env bash
# Every test of the collection. Run as root on Debian 12: installs what it
# needs first (scripts/bootstrap.sh; tests/molecule.sh installs podman and a
# Molecule venv of its own), then
#   1. ansible-test sanity (ignore files empty),
#   2. ansible-lint, production profile, strict,
#   3. antsibull-changelog lint,
#   4. the docsite (antsibull-docs + Sphinx, warnings fail: tests/docs/build-docsite.sh),
#   5. the oldest supported and the newest ansible-core (tests/versions.sh):
#      ansible-doc, the module and the role on each, sanity on the newest,
#   6. the Molecule scenarios (podman containers, inside a network namespace
#      of their own),
#   7. the execution environment (tests/ee.sh): built with ansible-builder
#      (cached while its recipe is unchanged), the site play run in it through
#      ansible-runner and podman against the SSH fleet,
#   8. pytest: unit tests, ansible-doc of every plugin, filters and role
#      validation through ansible-playbook, the release tarball and installing
#      it, the changelog and the docs, and the integration tests against real
#      iptables (nf_tables and legacy) and real packets in network namespaces.
# Every step runs even when an earlier one failed; the exit status is
# non-zero if any failed. SKIP_MOLECULE=1 leaves step 6 out, SKIP_EE=1
# step 7 and SKIP_VERSIONS=1 step 5 (for a quick local run; CI runs
# everything).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
bash scripts/bootstrap.sh || exit 1
export PATH="$here/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$here/build/collections"

failed=()
step() {
  local name=$1; shift
  local start=$SECONDS
  echo "== $name"
  if "$@"; then
    [ "$name" = pytest ] || echo "== $name: ok ($((SECONDS - start)) s)"
  else
    echo "== $name: FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

step "ansible-test sanity" bash tests/sanity.sh
step "ansible-lint" ansible-lint --offline --profile production --strict
step "changelog lint" antsibull-changelog lint
step "docsite" bash tests/docs/build-docsite.sh
if [ "${SKIP_VERSIONS:-0}" != 1 ]; then
  step "ansible-core versions" bash tests/versions.sh
fi
if [ "${SKIP_MOLECULE:-0}" != 1 ]; then
  step "molecule" bash tests/molecule.sh
fi
if [ "${SKIP_EE:-0}" != 1 ]; then
  step "execution environment" bash tests/ee.sh
fi
step "pytest" pytest -n 2 -p no:cacheprovider tests "$@"

# On success pytest's summary stays the last line printed.
if [ "${#failed[@]}" -gt 0 ]; then
  echo "run-all: FAILED: ${failed[*]}"
  exit 1
fi
