"""What a node run of ip_masq_node imports when its resync code part finds
the code in place (every no-change run with the resync on): not the resync
itself, nor the agent config's parser it imports. The resync still travels
in the module's payload: AnsiballZ ships what the module's import
statements name, and the code part installs that code from there."""
import ast
import json
import os
import subprocess
import sys

from ansible.executor.module_common import ModuleDepFinder

from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node

# The directory above ansible_collections/ipmasq/agent/plugins/modules/ip_masq_node.py.
COLLECTIONS = os.path.abspath(ip_masq_node.__file__).rsplit(os.sep + 'ansible_collections' + os.sep, 1)[0]
PREFIX = 'ansible_collections.ipmasq.agent.plugins.module_utils.'
RESYNC = PREFIX + '_core.agent.resync'

# One node run's code part, in a process of its own (as a node runs it): the
# modules of the core's agent and upstream config packages it has imported.
CODE_PART = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run
written, removed, root = ip_masq_node.code_part({'path': sys.argv[2], 'python': sys.executable}, False, make_run())
print(json.dumps({'written': len(written), 'root': root,
                  'imported': sorted(m for m in sys.modules if m.startswith(%r) or m.startswith(%r))}))
''' % (RESYNC, PREFIX + '_core.upstream_config')


def code_part(lib):
    proc = subprocess.run([sys.executable, '-c', CODE_PART, COLLECTIONS, lib], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_code_part_that_finds_the_code_in_place_imports_neither_the_resync_nor_its_config_parser(tmp_path):
    lib = str(tmp_path / 'lib')
    first = code_part(lib)
    assert first['written'] > 0 and os.path.isdir(first['root'])
    again = code_part(lib)
    assert again == {'written': 0, 'root': first['root'], 'imported': []}


def test_the_payload_still_carries_the_resync():
    """ansible-core's own finder of what a module's payload carries names the resync in ip_masq_node."""
    with open(ip_masq_node.__file__, 'rb') as handle:
        tree = ast.parse(handle.read())
    found = ModuleDepFinder('ansible_collections.ipmasq.agent.plugins.modules.ip_masq_node', tree).submodules
    assert tuple(RESYNC.split('.')) in found
