"""The resync code's installer carries the core's subpackages: a copy of the
collection whose ``_core`` has a package folder (``probe/``, with its own
``__init__.py`` and a nested package), imported by the resync, is installed
by the real ``resync_code`` module through ansible-playbook (its payload is
AnsiballZ's, so only what the module's imports reach travels), and a
process with only the installed directory on its path imports the resync
and the subpackage from it, from the root the controller names (the same
code, so the same id).  This is what lets ``_core`` be given folders with
no change to the installer."""
import os
import shutil
import subprocess
import sys

from ipmasq_lab import netlab

CORE = 'plugins/module_utils/_core'
PROBE = {'probe/__init__.py': '',
         'probe/deep/__init__.py': '',
         'probe/deep/leaf.py': 'from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import errors\n'
                               'VALUE = errors.MasqError.__name__\n'}
IMPORT = ('from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync; '
          'from ansible_collections.ipmasq.agent.plugins.module_utils._core.probe.deep import leaf; '
          'print(leaf.VALUE, resync.PROBE is leaf, leaf.__file__)')
CONTROLLER_ROOT = ('import sys; from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root; '
                   'print(resync_root(sys.argv[1]))')
PLAY = '''- hosts: localhost
  gather_facts: false
  tasks:
    - name: Install
      ipmasq.agent.resync_code:
        path: "{{ lib }}"
'''


def collection_with_probe(top):
    """A copy of this collection below ``top`` whose core has the package
    ``probe`` (and ``probe.deep``), imported by ``resync.py``."""
    dest = os.path.join(top, 'ansible_collections', 'ipmasq', 'agent')
    os.makedirs(dest)
    shutil.copytree(os.path.join(netlab.ROOT, 'plugins'), os.path.join(dest, 'plugins'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('galaxy.yml', 'meta'):
        source = os.path.join(netlab.ROOT, name)
        (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, os.path.join(dest, name))
    core = os.path.join(dest, CORE)
    for name, text in PROBE.items():
        os.makedirs(os.path.dirname(os.path.join(core, name)), exist_ok=True)
        with open(os.path.join(core, name), 'w') as handle:
            handle.write(text)
    with open(os.path.join(core, 'agent/resync.py'), 'a') as handle:
        handle.write('\nfrom ansible_collections.ipmasq.agent.plugins.module_utils._core.probe.deep import leaf as PROBE'
                     '  # noqa: E402\n')


def test_the_module_installs_a_core_with_subpackages_that_the_node_imports(tmp_path):
    collection_with_probe(str(tmp_path / 'copy'))
    play = tmp_path / 'play.yml'
    play.write_text(PLAY)
    lib = str(tmp_path / 'lib')
    with netlab.Netns('subpkg') as ns:
        rc, tasks = netlab.playbook(ns, str(play), extra_vars={'lib': lib},
                                    env_extra={'ANSIBLE_COLLECTIONS_PATH': str(tmp_path / 'copy')})
    result = dict(tasks)['Install']
    assert rc == 0 and result.get('changed') is True, result
    assert {'probe/__init__.py', 'probe/deep/__init__.py', 'probe/deep/leaf.py'} <= set(result['written']), result
    # The root the controller names in the unit (computed from the copy's source tree, as the role's
    # action does) is the one the module installed from its payload.
    root = subprocess.run([sys.executable, '-c', CONTROLLER_ROOT, lib], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path / 'copy')), check=True).stdout.strip()
    assert result['path'] == os.path.join(root, 'ansible_collections/ipmasq/agent', CORE), (root, result['path'])
    assert os.listdir(os.path.join(lib, 'v')) == [os.path.basename(root)]
    proc = subprocess.run(['/usr/bin/python3', '-S', '-B', '-c', IMPORT], capture_output=True, text=True,
                          env={'PYTHONPATH': root, 'PATH': os.environ['PATH']}, timeout=60, check=False)
    version = os.path.join(root, 'ansible_collections/ipmasq/agent', CORE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['MasqError', 'True', os.path.join(version, 'probe', 'deep', 'leaf.py')]
    assert os.path.isdir(os.path.join(version, 'probe', 'deep', '__pycache__'))
