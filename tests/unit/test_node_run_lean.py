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

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node

# The directory above ansible_collections/ipmasq/agent/plugins/modules/ip_masq_node.py.
COLLECTIONS = os.path.abspath(ip_masq_node.__file__).rsplit(os.sep + 'ansible_collections' + os.sep, 1)[0]
PREFIX = 'ansible_collections.ipmasq.agent.plugins.module_utils.'
RESYNC = PREFIX + '_core.agent.resync'
INSTALLER = PREFIX + '_resync_code'

# One node run's code part, in a process of its own (as a node runs it): the
# modules of the core's agent and upstream config packages it has imported.
CODE_PART = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.ipmasq.agent.plugins.modules import ip_masq_node
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run
params = {'path': sys.argv[2], 'python': sys.executable}
if len(sys.argv) > 3:
    params['root'] = sys.argv[3]
written, removed, root = ip_masq_node.code_part(params, False, make_run())
print(json.dumps({'written': len(written), 'root': root,
                  'imported': sorted(m for m in sys.modules if m.startswith(%r) or m.startswith(%r)),
                  'computed': sorted(sys.modules[%r]._ID) if %r in sys.modules else None}))
''' % (RESYNC, PREFIX + '_core.upstream_config', INSTALLER, INSTALLER)


def run_code_part(lib, root=None):
    """One code part in a process of its own; ``root``: the root the controller named."""
    return subprocess.run([sys.executable, '-c', CODE_PART, COLLECTIONS, lib] + ([root] if root else []),
                          capture_output=True, text=True, timeout=120, check=False)


def code_part(lib, root=None):
    proc = run_code_part(lib, root)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_code_part_that_finds_the_code_in_place_imports_neither_the_resync_nor_its_config_parser(tmp_path):
    lib = str(tmp_path / 'lib')
    first = code_part(lib)
    assert first['written'] > 0 and os.path.isdir(first['root'])
    again = code_part(lib)
    assert again == {'written': 0, 'root': first['root'], 'imported': [], 'computed': ['id', 'sources']}


def test_a_code_part_given_the_root_in_place_reads_none_of_the_code(tmp_path):
    """The role's node run names the controller's root: where that root is
    in place (a root is renamed into place only once whole), the code part
    neither imports the installer nor reads or hashes the payload's code;
    where it is not there yet, or is not below the path, it does, as before."""
    lib = str(tmp_path / 'lib')
    root = _resync_code.resync_root(lib)
    first = code_part(lib, root)
    assert first['written'] > 0 and first['root'] == root and first['computed'] == ['id', 'sources']
    assert code_part(lib, root) == {'written': 0, 'root': root, 'imported': [], 'computed': None}
    # A root below another path is not this path's: the part computes its own and refuses, writing nothing.
    other = str(tmp_path / 'other')
    refused = run_code_part(other, root)
    assert refused.returncode != 0 and 'the controller named %s in the unit' % root in refused.stderr
    assert not os.path.exists(other)


def test_the_payload_still_carries_the_resync():
    """ansible-core's own finder of what a module's payload carries names the resync in ip_masq_node."""
    with open(ip_masq_node.__file__, 'rb') as handle:
        tree = ast.parse(handle.read())
    found = ModuleDepFinder('ansible_collections.ipmasq.agent.plugins.modules.ip_masq_node', tree).submodules
    assert tuple(RESYNC.split('.')) in found
