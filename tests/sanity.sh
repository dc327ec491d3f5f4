#!/usr/bin/env bash
# ansible-test sanity on a clean copy of the tracked files (ansible-test wants
# the tree under ansible_collections/<ns>/<name>). Ignore files must be empty.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
for f in tests/sanity/ignore-*.txt; do
  [ -e "$f" ] || continue
  if [ -s "$f" ]; then echo "sanity: $f is not empty" >&2; exit 1; fi
done
dest=build/sanity/ansible_collections/ipmasq/agent
rm -rf build/sanity
mkdir -p "$dest"
# Tracked and new (not ignored) files only, as a release tarball would hold.
git ls-files -z --cached --others --exclude-standard | rsync -a --from0 --files-from=- ./ "$dest/"
cd "$dest"
git init -q . && git add -A >/dev/null
export PATH="$here/.venv/bin:$PATH"
ansible-test sanity --python "$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --requirements --color no "$@"
