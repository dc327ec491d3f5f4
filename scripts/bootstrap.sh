#!/usr/bin/env bash
# Install everything the demo and the tests need on a fresh Debian 12 machine
# (run as root): Debian packages, then a virtualenv in .venv with the Python
# test dependencies. Idempotent: a second run only checks.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. scripts/apt.sh

# openssh-server: the SSH fleet test (tests/lab/ipmasq_lab/fleetlab.py) starts
# /usr/sbin/sshd itself, one per test host inside that host's network
# namespace. The package's own daemon must never run on this machine: see
# below.
# containernetworking-plugins: the CNI test (tests/integration/test_cni.py) runs
# its bridge, ptp, portmap and host-local plugins inside network namespaces
# (tests/lab/ipmasq_lab/cni.py); its cni-dhcp units stay disabled.
apt_pkgs=(iptables nftables iproute2 python3 python3-venv python3-pip rsync iputils-ping netcat-openbsd conntrack tcpdump git shellcheck systemd openssh-server containernetworking-plugins)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
missing=()
for p in "${apt_pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
sshd_was_missing=0
installed openssh-server || sshd_was_missing=1
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # No service may start while packages install (openssh-server's postinst
  # would start sshd on port 22 of this machine): policy-rc.d answers 101
  # ("action forbidden") to invoke-rc.d / deb-systemd-invoke. One that is
  # already there is left as it is; ours is removed again.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/bootstrap.sh: no service starts during the install\nexit 101\n' > "$policy"
    chmod 0755 "$policy"
    own_policy=1
    trap 'rm -f "$policy"' EXIT
  fi
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ "$own_policy" = 1 ]; then rm -f "$policy"; trap - EXIT; fi
fi

# The package's own sshd: when this script installed openssh-server, the
# service is disabled and masked (ssh.service, ssh.socket) and Debian's
# /etc/ssh/sshd_not_to_be_run keeps its init script and unit from starting it.
# An openssh-server that was there before is the machine owner's: left alone.
if [ "$sshd_was_missing" = 1 ]; then
  echo "bootstrap: openssh-server is for the fleet test only: its own service is disabled and masked"
  touch /etc/ssh/sshd_not_to_be_run
  if command -v systemctl >/dev/null; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true
    else
      systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true
    fi
    systemctl mask ssh.service ssh.socket >/dev/null 2>&1 || true
  fi
fi
if [ -e /etc/ssh/sshd_not_to_be_run ]; then
  # Check: not enabled, and no daemon started from the package's own config
  # (the fleet test's daemons all run with -f <their own config>).
  if command -v systemctl >/dev/null; then
    state=$(systemctl is-enabled ssh.service 2>/dev/null || true)
    case "$state" in
      enabled|enabled-runtime|static|alias)
        echo "bootstrap: ssh.service is $state: disable it (systemctl mask ssh.service)" >&2; exit 1 ;;
    esac
  fi
  if [ -s /run/sshd.pid ] && kill -0 "$(cat /run/sshd.pid)" 2>/dev/null; then
    echo "bootstrap: the openssh-server package's own sshd is running (pid $(cat /run/sshd.pid)): stop it" >&2
    exit 1
  fi
fi

# The venv is made from Debian's own python3 so that what CI sees is what a
# fresh Debian 12 machine sees.
py=/usr/bin/python3
stamp=.venv/.requirements.sha
# tests/requirements.txt includes meta/ee-requirements.txt: both make the stamp.
want=$(cat tests/requirements.txt meta/ee-requirements.txt | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$py" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
# Installed in place when the requirements change (never removed and made
# anew, so that a run going on at the same time keeps its tools).
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: installing tests/requirements.txt into .venv"
  .venv/bin/pip install -q -r tests/requirements.txt
  echo "$want" > "$stamp"
fi

# galaxy-importer (tests/importer-requirements.txt: what Galaxy and Automation
# Hub run on an upload; scripts/galaxy_import.sh) in a venv of its own,
# .venv-importer: it pins attrs<24, flake8<7 and ansible-lint<=26.10.1, which
# would hold .venv's tools back.
istamp=.venv-importer/.requirements.sha
iwant=$(sha256sum tests/importer-requirements.txt | cut -d' ' -f1)
if [ ! -x .venv-importer/bin/python ]; then
  echo "bootstrap: creating .venv-importer"
  "$py" -m venv .venv-importer
  .venv-importer/bin/pip install -q --upgrade pip
fi
if [ "$(cat "$istamp" 2>/dev/null)" != "$iwant" ]; then
  echo "bootstrap: installing tests/importer-requirements.txt into .venv-importer"
  .venv-importer/bin/pip install -q -r tests/importer-requirements.txt
  echo "$iwant" > "$istamp"
fi

# The lab the tests, bench/ and the demo share (tests/lab/ipmasq_lab) is
# imported by name: a .pth file puts tests/lab on the venv's path. The line is
# relative to site-packages, so a venv reached through a checkout's .venv link
# names that checkout's lab.
.venv/bin/python - <<'PY'
import os, sysconfig
site = sysconfig.get_paths()['purelib']
line = os.path.relpath(os.path.abspath('tests/lab'), site) + '\n'
pth = os.path.join(site, 'ipmasq_lab.pth')
old = open(pth).read() if os.path.exists(pth) else None
if old != line:
    with open(pth + '.tmp', 'w') as handle:
        handle.write(line)
    os.replace(pth + '.tmp', pth)
PY

# ansible finds the collection through an ansible_collections/ tree.
mkdir -p build/collections/ansible_collections/ipmasq
ln -sfn "$here" build/collections/ansible_collections/ipmasq/agent
echo "bootstrap: ready (.venv, build/collections)"
