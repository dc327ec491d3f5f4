#!/usr/bin/env bash
# The collection on the oldest supported ansible-core (2.16) and on the newest
# release (tests/versions/{oldest,newest}.txt):
#
#   bash tests/versions.sh              # both
#   bash tests/versions.sh newest       # one of them
#
# For each version, a venv kept outside the checkout, where it outlives a clean
# clone (CI clones afresh each run): $IMQ_CACHE_DIR (default
# /var/cache/ipmasq-agent, or build/cache when that is not writable)
# /core-<name>-<key>, the key a hash of the requirements files, this script's
# venv recipe and the Python's version and path. A new key makes a new venv
# (other keys' venvs are removed once unused for a week); a venv whose build did not finish, or
# whose ansible no longer imports, is made again. A cached venv is brought up
# to what a new one would hold (pip install --upgrade, eager: the newest
# releases the requirements allow) once it is a day old
# (IMQ_VENV_REFRESH_MINUTES, default 1440; 0: every run), so a cached run
# tests what an uncached one would, or did a day ago at most. Then, with that version's ansible-playbook and
# ansible-doc (IMQ_ANSIBLE_BIN):
#   - ansible-doc of every plugin and of the role (tests/docs/test_ansible_doc.py);
#   - the module against real iptables (nf_tables) in network namespaces: the four-step
#     check/apply/check/apply pattern, absent, the golden listings;
#   - the whole role in a network namespace, its node-side parts (config file,
#     resync code, units) in a temporary directory, and the resync service's
#     command line run there (tests/integration/test_role_sandbox.py);
#   - newest only: ansible-test sanity with empty ignore files (tests/sanity.sh).
#
# ansible-core 2.20 and later need Python >= 3.12, which Debian 12 does not
# ship. The newest version's venv is made from the first of: $IMQ_NEWEST_PYTHON,
# python3.13/python3.12 on PATH, the pyenv interpreters of this machine image
# (/root/.pyenv/versions/3.1[2-9]*). Without one it fails, saying so.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
[ -x .venv/bin/pytest ] || { echo "versions.sh: run scripts/bootstrap.sh first" >&2; exit 2; }

names=("$@")
[ "${#names[@]}" -gt 0 ] || names=(oldest newest)

py_ok() {  # py_ok PYTHON: Python >= 3.12 with a working venv module
  "$1" -c 'import sys, venv, ensurepip, ssl; sys.exit(sys.version_info < (3, 12))' 2>/dev/null
}

newest_python() {
  local c
  local pyenv=()
  # the machine image's interpreters, newest first (the glob stays as it is when none exists)
  for c in /root/.pyenv/versions/3.1[2-9]*/bin/python3; do pyenv=("$c" "${pyenv[@]}"); done
  for c in "${IMQ_NEWEST_PYTHON:-}" "$(command -v python3.13 || true)" "$(command -v python3.12 || true)" \
           "${pyenv[@]}"; do
    [ -n "$c" ] && py_ok "$c" && { echo "$c"; return 0; }
  done
  return 1
}

cache_root() {  # where the venvs live: outside the clone, writable
  local c=${IMQ_CACHE_DIR:-/var/cache/ipmasq-agent}
  if mkdir -p "$c" 2>/dev/null && [ -w "$c" ]; then echo "$c"; return 0; fi
  echo "versions.sh: $c is not writable; the venvs go to build/cache (not kept between clean clones)" >&2
  mkdir -p "$here/build/cache" && echo "$here/build/cache"
}

pip_q() {  # pip_q VENV ARGS...: quiet pip, without the machine's find-links noise
  "$1/bin/pip" "${@:2}" 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  return "${PIPESTATUS[0]}"
}

venv_for() {  # venv_for NAME PYTHON: sets venv to the cached venv with tests/versions/NAME.txt
  local name=$1 py=$2 reqs="tests/versions/$1.txt" root key
  root=$(cache_root) || return 1
  # Bump "recipe" when the way a venv is made changes.
  key=$( { echo "recipe 2"; cat "$reqs" meta/ee-requirements.txt
           "$py" -c 'import sys; print(sys.executable, sys.version)'; } | sha256sum | cut -c1-16)
  venv="$root/core-$name-$key"
  exec 9>"$root/core-$name.lock"
  flock 9  # one run at a time makes or refreshes a venv of this name
  # Other keys' venvs (other checkouts may be using them) go once unused for a week.
  local old
  while IFS= read -r old; do
    [ "$old" != "$venv" ] && { echo "versions.sh: removing $old (another key, unused for a week)"; rm -rf "$old"; }
  done < <(find "$root" -mindepth 1 -maxdepth 1 -type d -name "core-$name-*" -mtime +7)
  if [ -f "$venv/.complete" ] && ! "$venv/bin/python" -c 'import ansible.release' 2>/dev/null; then
    echo "versions.sh: $venv: its ansible does not import; making it again"
    rm -f "$venv/.complete"
  fi
  if [ -f "$venv/.complete" ]; then
    # Resolving the requirements again costs about what making the venv does:
    # once a day (IMQ_VENV_REFRESH_MINUTES) is enough to follow new releases.
    if [ -n "$(find "$venv/.complete" -mmin +"${IMQ_VENV_REFRESH_MINUTES:-1440}")" ]; then
      echo "versions.sh: $venv: cached; bringing it up to date"
      if pip_q "$venv" install -q --upgrade --upgrade-strategy eager -r "$reqs"; then
        touch "$venv/.complete"
      else
        echo "versions.sh: updating $venv failed; making it again" >&2
        rm -f "$venv/.complete"
      fi
    else
      echo "versions.sh: $venv: cached, brought up to date less than ${IMQ_VENV_REFRESH_MINUTES:-1440} minutes ago"
    fi
  fi
  if [ ! -f "$venv/.complete" ]; then
    echo "versions.sh: making $venv ($("$py" -V), $reqs)"
    rm -rf "$venv"
    if ! { "$py" -m venv "$venv" && pip_q "$venv" install -q --upgrade pip &&
           pip_q "$venv" install -q -r "$reqs"; }; then
      flock -u 9
      exec 9>&-
      return 1
    fi
    touch "$venv/.complete"  # last: a venv without it is made again
  fi
  touch "$venv"  # used now
  flock -u 9
  exec 9>&-
  echo "versions.sh: $venv: ansible-core $("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')"
}

failed=()
for name in "${names[@]}"; do
  case "$name" in
    oldest) py=/usr/bin/python3 ;;
    newest)
      if ! py=$(newest_python); then
        echo "versions.sh: FAILED: the newest ansible-core needs Python >= 3.12 with venv and ssl, and none was" >&2
        echo "  found (IMQ_NEWEST_PYTHON, python3.13/python3.12 on PATH, /root/.pyenv/versions/3.1[2-9]*)." >&2
        echo "  Install one, or point IMQ_NEWEST_PYTHON at it." >&2
        failed+=("$name: no Python >= 3.12")
        continue
      fi
      ;;
    *) echo "versions.sh: unknown version set $name (oldest, newest)" >&2; exit 2 ;;
  esac
  start=$SECONDS
  if ! venv_for "$name" "$py"; then
    failed+=("$name: venv")
    continue
  fi
  echo "versions.sh: venv ready in $((SECONDS - start)) s"
  bin="$venv/bin"
  if [ "$name" = newest ]; then
    # A newer minor release than the file allows: say so (the file is raised by hand).
    latest=$("$bin/pip" index versions ansible-core 2>/dev/null | sed -n 's/^ansible-core (\(.*\))$/\1/p' || true)
    have=$("$bin/python" -c 'import ansible.release as r; print(r.__version__)')
    if [ -n "$latest" ] && [ "${latest%.*}" != "${have%.*}" ]; then
      echo "versions.sh: NOTE: ansible-core $latest is out; tests/versions/newest.txt still says ${have%.*}"
    fi
  fi
  echo "== ansible-core $name: ansible-doc, module, role"
  # Not the legacy iptables backend: which iptables backend the node uses does
  # not depend on the controller's ansible-core (the main pytest run covers
  # it); iptables-nft and the nftables backend both run.
  if ! IMQ_ANSIBLE_BIN="$bin" .venv/bin/pytest -q -n 2 -p no:cacheprovider -k "not legacy" \
      tests/docs/test_ansible_doc.py tests/integration/test_role_sandbox.py \
      "tests/integration/test_masq_chain.py::test_defaults_four_steps_and_exact_rules" \
      "tests/integration/test_masq_chain.py::test_absent_four_steps_removes_everything_and_keeps_foreign_rules" \
      "tests/integration/test_masq_chain.py::test_golden_listing" \
      "tests/integration/test_masq_chain.py::test_ipv6"; then
    failed+=("$name: pytest")
  fi
  if [ "$name" = newest ]; then
    echo "== ansible-core $name: ansible-test sanity"
    IMQ_ANSIBLE_BIN="$bin" bash tests/sanity.sh || failed+=("$name: sanity")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "versions.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "versions.sh: ok (${names[*]})"
