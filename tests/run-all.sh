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
# pytest runs in two parts: the tests marked checks_lane (the unit and
# documentation tests, the release and install tests, the audit gate's and
# three integration files of namespaces only: tests/checks-lane.txt) at the
# end of the checks lane, one worker; the other integration tests, three
# workers on the two cores (an ansible-playbook run waits about half its
# time: test_chain_rename.py took 117 s with two workers, 102 s with three;
# test_backends.py 108 s and 85 s), start as soon as EITHER lane ends and run
# beside the other lane's end, so that neither core waits idle for the slower
# lane. The Molecule scenarios run through the podman connection with
# pipelining (tests/molecule.sh): one `podman exec` per module instead of
# five. In the full run of 2026-11-29 without either (quiet machine): checks
# lane about 1,240 s (sanity 108, ansible-lint 59, changelog 4, docsite 29,
# ansible-core versions 410, ee 20, checks_lane pytest 610), Molecule
# 1,501 s, then the integration tests 1,092 s: 2,594 s in all (user 54 min
# + sys 12 min of CPU). Pipelining, measured on the default scenario back to
# back on a loaded machine: 134 -> 118 s and 85 -> 79 s, CPU 40 -> 28 s and
# 34 -> 28 s (every scenario passes with it). Estimated, not yet measured
# whole: Molecule about 1,350 s, the checks lane about 1,240 s, so pytest
# starts near 1,240 s beside Molecule's end: about 2,350 s in all.
# Each part lists its slowest tests at its end (--durations), so a run's log
# says where CI's time went. The two parts are every test; a failure in either fails the run. Every step runs even when an earlier one failed; the exit status is
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
    echo "== $name: ok ($((SECONDS - start)) s)"
  else
    echo "== $name: FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

# Two lanes side by side, one a core (the machine has two): the Molecule
# scenarios, whose containers mostly wait on systemd and podman, beside the
# checks, the ansible-core versions and the execution environment. Each lane
# writes its output to a log of its own, printed whole at the end, and the
# names of its failed steps to a file; pytest (three workers) starts when the
# first lane ends.
lanes="$here/build/run-all"
rm -rf "$lanes"
mkdir -p "$lanes"
lane_pytest() {  # pytest's checks_lane part; none selected (-k ... given to run-all) is no failure
  local rc=0
  pytest -p no:cacheprovider --durations=15 -m checks_lane tests "$@" || rc=$?
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
  echo "== checks lane done at $((SECONDS - lanes_start)) s"
  printf '%s\n' "${failed[@]}" > "$lanes/checks.failed"
}
molecule_lane() {
  if [ "${SKIP_MOLECULE:-0}" != 1 ]; then
    step "molecule" bash tests/molecule.sh
  fi
  echo "== molecule lane done at $((SECONDS - lanes_start)) s"
  printf '%s\n' "${failed[@]}" > "$lanes/molecule.failed"
}
lanes_start=$SECONDS
echo "== two lanes: checks, versions, execution environment and pytest's checks_lane part | molecule (logs in build/run-all/)"
checks_lane "$@" > "$lanes/checks.log" 2>&1 < /dev/null &
checks_pid=$!
molecule_lane > "$lanes/molecule.log" 2>&1 < /dev/null &
molecule_pid=$!
lane_done() {  # lane_done NAME: print the lane's log and take its failed steps
  local lane=$1 name
  echo "== lane $lane (build/run-all/$lane.log)"
  cat "$lanes/$lane.log"
  if [ -f "$lanes/$lane.failed" ]; then
    while IFS= read -r name; do
      if [ -n "$name" ]; then failed+=("$name"); fi
    done < "$lanes/$lane.failed"
  else
    failed+=("lane $lane (it ended without saying which steps failed)")
  fi
}
# The integration tests (pytest -n 3) start as soon as either lane ends, beside
# the other lane's end: the core the ended lane leaves idle, and the time
# Molecule's containers wait, go to pytest's workers. Each lane's log is
# printed when it has ended and pytest has too.
declare -A lane_of=([$checks_pid]=checks [$molecule_pid]=molecule)
first_pid=
wait -n -p first_pid "$checks_pid" "$molecule_pid" || true
first=${first_pid:+${lane_of[$first_pid]}}
echo "== lane $first done in $((SECONDS - lanes_start)) s; pytest starts"
step "pytest" pytest -n 3 -p no:cacheprovider --durations=25 -m "not checks_lane" tests "$@"
wait "$checks_pid" "$molecule_pid"
lane_done checks
lane_done molecule
echo "== all done in $((SECONDS - lanes_start)) s"

if [ "${#failed[@]}" -gt 0 ]; then
  echo "run-all: FAILED: ${failed[*]}"
  exit 1
fi
echo "run-all: ok"
