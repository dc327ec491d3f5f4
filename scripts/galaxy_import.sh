#!/usr/bin/env bash
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Run galaxy-importer, the importer Galaxy and Automation Hub run on an
# upload, on a built tarball: scripts/galaxy_import.sh ipmasq-agent-X.Y.Z.tar.gz
# Offline, with tests/galaxy-importer.cfg (which says what is switched off and
# why), from .venv-importer (scripts/bootstrap.sh; IMPORTER_VENV overrides).
# Fails when the import fails or logs a warning or an error. Used by
# tests/install/test_galaxy_importer.py and scripts/release.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "$#" -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: scripts/galaxy_import.sh TARBALL (an existing file)" >&2
  exit 2
fi
tarball=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
venv=${IMPORTER_VENV:-$here/.venv-importer}
if [ ! -x "$venv/bin/python" ]; then
  echo "galaxy_import.sh: no importer venv at $venv: run scripts/bootstrap.sh" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/home"
# The importer writes importer_result.json beside the file it reads.
cp "$tarball" "$work/"
# Nothing of the caller's ansible setup (ANSIBLE_COLLECTIONS_PATH, ~/.ansible):
# the importer sees the tarball alone.
env_args=()
while IFS= read -r name; do env_args+=(-u "$name"); done < <(compgen -e | grep '^ANSIBLE_' || true)
rc=0
(cd "$work" && env "${env_args[@]}" HOME="$work/home" GALAXY_IMPORTER_CONFIG="$here/tests/galaxy-importer.cfg" \
   PATH="$venv/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
   "$venv/bin/python" -m galaxy_importer.main "$(basename "$tarball")") > "$work/importer.log" 2>&1 || rc=$?
cat "$work/importer.log"
if [ "$rc" -ne 0 ]; then
  echo "galaxy_import.sh: the importer refused $(basename "$tarball") (exit status $rc)" >&2
  exit 1
fi
if grep -E '^(WARNING|ERROR|CRITICAL):' "$work/importer.log" >/dev/null; then
  echo "galaxy_import.sh: the importer logged warnings or errors for $(basename "$tarball")" >&2
  exit 1
fi
if ! grep -qx 'Importer processing completed successfully' "$work/importer.log"; then
  echo "galaxy_import.sh: the importer did not say it completed" >&2
  exit 1
fi
echo "galaxy_import.sh: $(basename "$tarball") imports cleanly"
