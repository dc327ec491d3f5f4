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
# Steps 1-5 and 7 run in one lane, step 6 in another beside it (two cores).
# The checks lane's steps take about 600 s and Molecule about 1,390 s, so
# pytest runs in two parts: the tests marked checks_lane (the unit and
# documentation tests, the release and install tests, the audit gate's and
# three integration files of namespaces only: tests/checks-lane.txt, chosen
# so that the lane ends about 150 s before the Molecule one) at the end of the
# checks lane, one worker; the other integration tests after both lanes,
# three workers on the two cores (an ansible-playbook run waits about half
# its time: test_chain_rename.py took 117 s with two workers, 102 s with
# three; test_backends.py 108 s and 85 s). In the full run of 2026-11-29
# (before the three integration files moved into the lane): lanes 1,385 s,
# that part 1,177 s, 2,562 s in all.
# The two parts are every test; a failure in either fails the run. Every step runs even when an earlier one failed; the exit status is
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

# Two lanes side by side, one a core (the machine has two): the Molecule
# scenarios, whose containers mostly wait on systemd and podman, beside the
# checks, the ansible-core versions and the execution environment. Each lane
# writes its output to a log of its own, printed whole when both are done, and
# the names of its failed steps to a file; pytest (three workers) runs after.
lanes="$here/build/run-all"
rm -rf "$lanes"
mkdir -p "$lanes"
lane_pytest() {  # pytest's checks_lane part; none selected (-k ... given to run-all) is no failure
  local rc=0
  pytest -p no:cacheprovider -m checks_lane tests "$@" || rc=$?
  [ "$rc" -eq 5 ] && { echo "(no checks_lane test selected)"; rc=0; }
  return "$rc"
}
checks_lane() {
  step "ansible-test sanity" bash tests/sanity.sh
  step "ansible-lint" ansible-lint --offline --profile production --strict
  step "changelog lint" antsibull-changelog lint
  step "docsite" bash tests/docs/build-docsite.sh
  if [ "${SKIP_VERSIONS:-0}" != 1 ]; then
    step "ansible-core versions" bash tests/versions.sh
  fi
  if [ "${SKIP_EE:-0}" != 1 ]; then
    step "execution environment" bash tests/ee.sh
  fi
  step "pytest (checks lane)" lane_pytest "$@"
  printf '%s\n' "${failed[@]}" > "$lanes/checks.failed"
}
molecule_lane() {
  if [ "${SKIP_MOLECULE:-0}" != 1 ]; then
    step "molecule" bash tests/molecule.sh
  fi
  printf '%s\n' "${failed[@]}" > "$lanes/molecule.failed"
}
lanes_start=$SECONDS
echo "== two lanes: checks, versions, execution environment and pytest's checks_lane part | molecule (logs in build/run-all/)"
checks_lane "$@" > "$lanes/checks.log" 2>&1 < /dev/null &
checks_pid=$!
molecule_lane > "$lanes/molecule.log" 2>&1 < /dev/null &
molecule_pid=$!
wait "$checks_pid" "$molecule_pid"
for lane in checks molecule; do
  echo "== lane $lane (build/run-all/$lane.log)"
  cat "$lanes/$lane.log"
  if [ -f "$lanes/$lane.failed" ]; then
    while IFS= read -r name; do
      if [ -n "$name" ]; then failed+=("$name"); fi
    done < "$lanes/$lane.failed"
  else
    failed+=("lane $lane (it ended without saying which steps failed)")
  fi
done
echo "== both lanes done in $((SECONDS - lanes_start)) s"
step "pytest" pytest -n 3 -p no:cacheprovider -m "not checks_lane" tests "$@"

# On success pytest's summary stays the last line printed.
if [ "${#failed[@]}" -gt 0 ]; then
  echo "run-all: FAILED: ${failed[*]}"
  exit 1
fi
