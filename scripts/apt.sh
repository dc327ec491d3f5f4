#!/usr/bin/env bash
# Sourced by scripts/bootstrap.sh and tests/molecule.sh: `apt_get ARGS...` runs
# apt-get once the package locks are free. A fresh machine often boots with
# unattended-upgrades holding them: instead of failing at once ("Could not get
# lock /var/lib/dpkg/lock-frontend"), wait, say so, and give up after
# APT_LOCK_WAIT seconds (600 by default). apt-get itself waits for the dpkg
# lock too (DPkg::Lock::Timeout), for a holder that takes it in between.
APT_LOCK_WAIT=${APT_LOCK_WAIT:-600}
# APT_LOCK_PATHS (space-separated) replaces the list, for the test only.
read -r -a _apt_locks <<<"${APT_LOCK_PATHS:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}"

# The pids holding one of apt's locks (fcntl locks, as lslocks lists them).
_apt_lock_holders() {
  local paths
  paths=$(printf '%s\n' "${_apt_locks[@]}")
  lslocks -n -r -o PID,PATH 2>/dev/null | while read -r pid path; do
    if grep -qxF -- "$path" <<<"$paths"; then echo "$pid"; fi
  done | sort -u
}

apt_get() {
  local start=$SECONDS told=0 holders
  while holders=$(_apt_lock_holders) && [ -n "$holders" ]; do
    if [ $((SECONDS - start)) -ge "$APT_LOCK_WAIT" ]; then
      echo "apt: the package locks are still held after ${APT_LOCK_WAIT} s (pids: ${holders//$'\n'/ }); giving up" >&2
      return 1
    fi
    if [ "$told" = 0 ]; then
      local who pid
      who=$(for pid in $holders; do printf '%s(%s) ' "$pid" "$(cat /proc/"$pid"/comm 2>/dev/null || echo '?')"; done)
      echo "apt: waiting for the package locks, held by ${who}(at most ${APT_LOCK_WAIT} s)" >&2
      told=1
    fi
    sleep 2
  done
  [ "$told" = 0 ] || echo "apt: the package locks are free after $((SECONDS - start)) s" >&2
  apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" "$@"
}
