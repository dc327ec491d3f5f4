#!/usr/bin/env bash
# Install everything the demo and the tests need on a fresh Debian 12 machine
# (run as root): Debian packages, then a virtualenv in .venv with the Python
# test dependencies. Idempotent: a second run only checks.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

apt_pkgs=(iptables nftables iproute2 python3 python3-venv python3-pip rsync iputils-ping netcat-openbsd conntrack tcpdump git shellcheck systemd)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

# ansible finds the collection through an ansible_collections/ tree.
mkdir -p build/collections/ansible_collections/ipmasq
ln -sfn "$here" build/collections/ansible_collections/ipmasq/agent
echo "bootstrap: ready (.venv, build/collections)"
