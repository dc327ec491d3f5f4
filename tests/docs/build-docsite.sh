#!/usr/bin/env bash
# Build the collection's docsite with antsibull-docs and Sphinx, as the Ansible
# docsite would, and fail on any warning: broken markup in a plugin's or the
# role's documentation, a broken reference, a guide that does not parse.
#
#   bash tests/docs/build-docsite.sh [OUT]    # default OUT: build/docsite
#
# Steps: antsibull-docs lint-collection-docs (plugin docs, the role's argument
# spec and docs/docsite/*.yml, rstcheck on the guides), then sphinx-init,
# antsibull-docs collection (RST for every plugin, the role and the guides of
# docs/docsite/extra-docs.yml) and sphinx-build -W. Offline: no intersphinx
# inventories are fetched. The site is in OUT/build/html.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$here/build/docsite}
export PATH="$here/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$here/build/collections"
export ANSIBLE_HOME="$here/build/ansible-home"
coll="$here/build/collections/ansible_collections/ipmasq/agent"
[ -e "$coll" ] || { echo "build-docsite: run scripts/bootstrap.sh first" >&2; exit 1; }

cd "$coll"
antsibull-docs lint-collection-docs --plugin-docs --check-extra-docs-refs --validate-collection-refs all --disallow-unknown-collection-refs .

rm -rf "$out"
mkdir -p "$out"
antsibull-docs sphinx-init --use-current --fail-on-error --no-add-antsibull-docs-version \
  --dest-dir "$out" --project ipmasq.agent --title 'ipmasq.agent' --html-short-title 'ipmasq.agent' \
  --copyright 'ipmasq.agent contributors, GPL-3.0-or-later' --index-rst-source "$here/tests/docs/site-index.rst" \
  ipmasq.agent >/dev/null
# Offline: no inventories from docs.python.org or docs.ansible.com.
echo 'intersphinx_mapping = {}' >> "$out/conf.py"
mkdir -p "$out/rst"
chmod og-w "$out/rst"
antsibull-docs --config-file "$out/antsibull-docs.cfg" collection --cleanup everything --fail-on-error \
  --use-current --dest-dir "$out/rst" ipmasq.agent
# Labels that antsibull-docs' pages point to in the Ansible docsite, whose
# inventory is not fetched here: defined once, empty, so that every other
# reference is still checked.
cat > "$out/rst/offline-labels.rst" <<'RST'
:orphan:

Labels of the Ansible docsite
=============================

.. _common_return_values:

Common return values
--------------------

.. _ansible_configuration_settings:

Ansible configuration settings
------------------------------

.. _action_plugins:

Action plugins
--------------

.. _ansible_collections.ansible.builtin.copy_module:

ansible.builtin.copy
--------------------

.. _ansible_collections.ansible.builtin.file_module:

ansible.builtin.file
--------------------
RST
sphinx-build -q -W --keep-going -b html -c "$out" "$out/rst" "$out/build/html"
echo "build-docsite: $out/build/html/index.html"
