"""Without netaddr every plugin still loads, and every call fails naming netaddr.

The check runs in a subprocess whose PYTHONPATH starts with a fake netaddr
package that raises ImportError, as an uninstalled library would.
"""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')

SCRIPT = r'''
import importlib, inspect, json, sys
from ansible.errors import AnsibleFilterError
out = {}
try:
    import netaddr  # noqa: F401
    out['netaddr'] = 'importable'
except ImportError as exc:
    out['netaddr'] = 'missing: %s' % exc
for kind, name, uses_netaddr in json.loads(sys.argv[1]):
    module = importlib.import_module('ansible_collections.ipmasq.agent.plugins.%s.%s' % (kind, name))
    table = module.FilterModule().filters() if kind == 'filter' else module.TestModule().tests()
    func = table[name]
    if not uses_netaddr:
        out[name] = {'loaded': True}
        continue
    required = [p for p in inspect.signature(func).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args = ['10.0.0.0/8'] if kind == 'test' else [['10.0.0.0/8']] * len(required)
    if name == 'snat_to':   # a list of addresses, not of CIDRs
        args = [['203.0.113.7']]
    try:
        result = func(*args)
    except AnsibleFilterError as exc:
        out[name] = {'loaded': True, 'error': str(exc)}
    else:
        out[name] = {'loaded': True, 'result': repr(result)}
print(json.dumps(out))
'''


def built_on_cidr(path):
    """Whether the plugin file imports plugin_utils/_cidr.py, itself or through
    the plugin_utils module that holds its check (``_snat_to``, ...)."""
    with open(path, encoding='utf-8') as handle:
        names = re.findall(r'plugins\.plugin_utils\.(\w+) import', handle.read())
    if '_cidr' in names:
        return True
    return any(built_on_cidr(os.path.join(ROOT, 'plugins', 'plugin_utils', name + '.py')) for name in names)


def plugins():
    """(kind, name, uses_netaddr) of every filter and test plugin of the collection;
    the CIDR plugins are those built on plugin_utils/_cidr.py."""
    found = []
    for kind in ('filter', 'test'):
        for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', kind, '*.py'))):
            name = os.path.splitext(os.path.basename(path))[0]
            if not name.startswith('_'):
                found.append((kind, name, built_on_cidr(path)))
    return found


def cidr_plugins():
    return [(kind, name) for kind, name, uses_netaddr in plugins() if uses_netaddr]


def run(tmp_path, hide):
    env = dict(os.environ)
    path = [COLLECTIONS]
    if hide:
        fake = tmp_path / 'hide' / 'netaddr'
        fake.mkdir(parents=True)
        (fake / '__init__.py').write_text("raise ImportError(\"No module named 'netaddr' (hidden by the test)\")\n")
        path.insert(0, str(tmp_path / 'hide'))
    env['PYTHONPATH'] = os.pathsep.join(path)
    proc = subprocess.run([sys.executable, '-c', SCRIPT, json.dumps(plugins())], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_there_are_plugins_to_check():
    assert {('filter', 'cidr_list'), ('filter', 'nonmasq_guard'), ('filter', 'cidr_aggregate'),
            ('filter', 'cidr_aggregate_report'), ('filter', 'cidr_split'), ('filter', 'cidr_overlaps'),
            ('filter', 'reserved_ranges'), ('filter', 'snat_to'), ('test', 'cidr')} <= set(cidr_plugins())


def test_without_netaddr_plugins_load_and_calls_name_the_library(tmp_path):
    out = run(tmp_path, hide=True)
    assert out.pop('netaddr').startswith('missing: ')
    # every plugin of the collection loads, CIDR or not
    assert sorted(out) == sorted(name for _kind, name, _uses in plugins())
    assert all(result['loaded'] for result in out.values())
    for _kind, name in cidr_plugins():
        result = out[name]
        assert 'error' in result, (name, result)
        message = result['error']
        assert message.startswith('ipmasq.agent.%s: this plugin needs the Python library netaddr' % name), message
        assert 'pip install netaddr' in message and 'hidden by the test' in message
        assert message.count('needs the Python library netaddr') == 1


def test_the_same_calls_succeed_with_netaddr(tmp_path):
    """The control for the test above: the difference is netaddr alone."""
    out = run(tmp_path, hide=False)
    assert out.pop('netaddr') == 'importable'
    for _kind, name in cidr_plugins():
        assert 'result' in out[name], (name, out[name])


@pytest.mark.parametrize('kind', ['filter', 'test'])
def test_ansible_doc_renders_without_netaddr(tmp_path, kind):
    fake = tmp_path / 'netaddr'
    fake.mkdir()
    (fake / '__init__.py').write_text('raise ImportError("hidden")\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               ANSIBLE_HOME=str(tmp_path / 'ansible-home'), ANSIBLE_NOCOLOR='1')
    names = ['ipmasq.agent.' + name for k, name in cidr_plugins() if k == kind]
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-doc'), '-t', kind, '--json']
                          + names, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(docs) == sorted(names)
    for name in names:
        assert docs[name]['doc']['requirements'] == ['netaddr (Python library, on the controller only)']
