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
# A tree of its own per run, so that two runs at once do not collide.
mkdir -p build
work=$(mktemp -d "$here/build/sanity.XXXXXX")
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/ipmasq/agent"
mkdir -p "$dest"
# Tracked and new (not ignored) files only, as a release tarball would hold.
git ls-files -z --cached --others --exclude-standard | rsync -a --from0 --files-from=- ./ "$dest/"
cd "$dest"
git init -q . && git add -A >/dev/null
# IMQ_ANSIBLE_BIN: the bin/ of another ansible-core's venv (tests/versions.sh).
export PATH="${IMQ_ANSIBLE_BIN:-$here/.venv/bin}:$PATH"
# ansible-test bootstraps pip in its sanity venvs with a script it downloads
# from a host outside the registries these machines reach; give it ours.
pip_version=$(python - <<'PY'
import re, ansible_test, os
src = open(os.path.join(os.path.dirname(ansible_test.__file__), '_internal', 'python_requirements.py')).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
cmp -s "$here/tests/get_pip_offline.py" "$cache" || cp "$here/tests/get_pip_offline.py" "$cache"
ansible-test sanity --python "$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --requirements --color no "$@"
