"""The daemon registry (plugins/module_utils/_daemons/registry.py) is the one
home of what the collection knows about daemons: the role's YAML and the
docs' table are generated from it (scripts/gen_daemons.py), the action, the
node run and the audit derive names, variables, tags, steps and owners
from it, a daemon registered by a test (tests/lab/ipmasq_lab/daemon_probe.py)
reaches all of them, and no other code names a daemon."""
import ast
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.action import ip_masq as action
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _role_args, _role_vars
from ansible_collections.ipmasq.agent.plugins.module_utils._audit import allow, owners
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import base, registry
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import MODES
from ipmasq_lab import daemon_probe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')
# The registered daemons' names, in the registry's order.
BUILT_IN = tuple(registry.names())


def test_the_generated_yaml_and_docs_are_the_registry_s():
    """defaults/main.yml, meta/argument_specs.yml, the docs' table and the core's owner table
    (_core/agent/owner_table.py): run scripts/gen_daemons.py when this fails."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'gen_daemons.py'), '--check'],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_role_declares_each_daemon_variable_as_the_registry_does():
    with open(os.path.join(ROOT, 'roles', 'ip_masq', 'meta', 'argument_specs.yml')) as handle:
        spec = yaml.safe_load(handle)['argument_specs']['ip_masq']['options']
    with open(os.path.join(ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml')) as handle:
        defaults = yaml.safe_load(handle)
    for daemon in registry.DAEMONS:
        entry = spec[daemon.variable]
        assert entry['choices'][:len(MODES)] == list(MODES) and entry['default'] == defaults[daemon.variable]
        assert defaults[daemon.variable] == daemon.default
        for name, (_option, declared) in daemon.variables.items():
            assert spec[name]['default'] == declared['default'] == defaults[name]
    named = set(name for name in spec if name.startswith('ip_masq_') and name[len('ip_masq_'):] in BUILT_IN)
    assert named == set(d.variable for d in registry.DAEMONS)


def test_each_daemon_s_options_are_its_editor_s():
    names = registry.names()
    assert len(set(names)) == len(names) and set(names) >= {'flannel', 'docker', 'kubelet'}
    assert names.index('flannel') < names.index('docker')   # restarting flanneld rewrites Docker's options
    for daemon in registry.DAEMONS:
        options, sync = daemon.editor()
        spec = base.argument_spec(**options)
        given = [daemon.read, daemon.edit, daemon.cleanup or {}, daemon.report or {}]
        given += [{option: None} for option, _spec in daemon.variables.values()]
        given += [{option: None} for option in daemon.policy]
        assert callable(sync) and all(set(g) <= set(spec) for g in given), daemon.name
        # A daemon whose edit needs no restart (the CNI networks) has no service.
        assert (daemon.service is None or daemon.service.endswith('.service')) and daemon.module
        assert os.path.exists(os.path.join(ROOT, 'plugins', 'modules', daemon.module + '.py'))
        # One the role restarts before its clean-up says how that clean-up runs after the restart (the
        # explanation's after mode foresees the restart with it): its editor's sync, as after the restart.
        if daemon.service and daemon.cleanup is not None:
            assert daemon.restarted is not None and getattr(daemon.restarted(), 'func', None) is sync, daemon.name


def test_the_descriptors_are_read_without_the_editors():
    """The audit and the controller import every descriptor, never the editors' code."""
    code = ('import sys; sys.path.insert(0, %r); '
            'from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners; owners.OWNERS; '
            'print(sorted(m for m in sys.modules if "._daemons." in m))' % COLLECTIONS)
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    loaded = set(name.rsplit('.', 1)[1] for name in ast.literal_eval(out.strip()))
    names = set('%s_names' % name for name in BUILT_IN if name != 'kubelet')     # what a descriptor and its editor share
    assert loaded == {'daemon', 'owner', 'registry'} | set('%s_daemon' % name for name in BUILT_IN) | names, loaded


def role_values(**given):
    """The daemons' role variables at their defaults, and ``given``."""
    values = dict((d.variable, d.default) for d in registry.DAEMONS)
    values.update((name, spec.get('default')) for d in registry.DAEMONS for name, (_o, spec) in d.variables.items())
    values.update(given)
    return values


@pytest.fixture
def probe(monkeypatch):
    """The test daemon, registered as a daemon file and its registry line would."""
    monkeypatch.setattr(registry, 'DAEMONS', registry.DAEMONS + (daemon_probe.DAEMON,))
    return daemon_probe.DAEMON


def test_a_registered_daemon_reaches_the_audit_s_owners(probe):
    assert 'probe' in owners.OWNERS and owners.OWNERS[-1] == 'unknown'
    assert owners.HINTS['probe'] == probe.owner.hint
    allow.parse_allow([{'owner': 'probe'}])
    cond = type('Cond', (), {'comments': [], 'ifaces': [], 'sources': []})()
    assert owners.attribute(['POSTROUTING', daemon_probe.PROBE_CHAIN], cond, 'IP-MASQ-AGENT') == 'probe'


def test_without_it_the_audit_does_not_know_it():
    assert 'probe' not in owners.OWNERS
    with pytest.raises(MasqError) as e:
        allow.parse_allow([{'owner': 'probe'}])
    assert "allow[0].owner 'probe' is not one of ip-masq-agent, docker, flannel, kube-proxy" in e.value.msg


def test_a_registered_daemon_reaches_the_action(probe):
    values = role_values(ip_masq_probe='manage')
    modes, deprecations = _role_args.daemon_modes(values)
    assert [(d.name, mode) for d, mode in modes][-1] == ('probe', 'manage')
    assert dict((d.name, mode) for d, mode in modes if d.name in ('flannel', 'docker', 'kubelet')) == {
        'flannel': 'auto', 'docker': 'auto', 'kubelet': 'report'}
    assert deprecations == []
    assert 'ip_masq_probe' in action.step_tags('other_snat') and 'ip_masq_probe' in action.step_tags('absent')
    step = _role_args.daemon_step(probe, 'manage', 'present', '/b', values)
    assert step == {'name': 'probe', 'manage': True, 'edit': {'state': 'present', 'backup_dir': '/b'},
                    'cleanup': {'state': 'present', 'backup_dir': '/b', 'remove_stale_rules': True}}
    assert _role_args.daemon_step(probe, 'auto', 'absent', '/b', values)['cleanup'] is None


def test_kubelet_s_set_is_auto_with_a_deprecation():
    values = role_values(ip_masq_kubelet='set')
    modes, deprecations = _role_args.daemon_modes(values)
    assert dict((d.name, mode) for d, mode in modes)['kubelet'] == 'auto'
    assert deprecations == ['ip_masq_kubelet: set is deprecated, use auto (the same).']
    kubelet = registry.daemon('kubelet')
    assert _role_args.daemon_step(kubelet, 'report', 'absent', '/b', values)['edit']['mode'] == 'report'
    assert 'mode' not in _role_args.daemon_step(kubelet, 'auto', 'present', '/b', values)['edit']


def test_the_checked_settings_carry_each_daemon_s_mode_and_step():
    """role_args gives the action every daemon's mode (a deprecated choice
    replaced), the deprecations and each step of a daemon not skip, from
    the typed values: the action only picks by tags and state."""
    with open(os.path.join(ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml')) as handle:
        defaults = yaml.safe_load(handle)
    for state in ('present', 'absent'):
        checked = _role_args.role_args(_role_vars.read(dict(defaults, ip_masq_state=state, ip_masq_kubelet='set',
                                                            ip_masq_docker='skip', ip_masq_backup_dir='/b'), 'h'))
        modes = dict((d.name, mode) for d, mode in checked['daemons'])
        assert [d.name for d, _mode in checked['daemons']] == list(BUILT_IN)
        assert modes['kubelet'] == 'auto' and modes['docker'] == 'skip'
        assert checked['deprecations'] == ['ip_masq_kubelet: set is deprecated, use auto (the same).']
        assert sorted(checked['daemon_steps']) == sorted(n for n in BUILT_IN if n != 'docker')
        kubelet = registry.daemon('kubelet')
        assert checked['daemon_steps']['kubelet'] == _role_args.daemon_step(kubelet, 'auto', state, '/b',
                                                                            checked['values'])


# Where no daemon may be named: the code that derives from the registry.
GENERIC = [
    'plugins/action/ip_masq.py',
    'plugins/modules/ip_masq_node.py',
    'plugins/plugin_utils',
    'plugins/module_utils/_audit',
    'plugins/module_utils/_daemons/base.py',
    'plugins/module_utils/_daemons/daemon.py',
    'plugins/module_utils/_daemons/registry.py',
    'plugins/module_utils/_msg.py',
]
ROLE_FILES = ['roles/ip_masq/tasks', 'roles/ip_masq/handlers']
# A daemon's name that is also the name of an owner the audit describes itself:
# the audit's "cni" tells every CNI plugin's rules (portmap's, the networks of
# other directories), not only those of the networks the cni daemon edits,
# whose descriptor therefore has no owner (as kubelet's rule is kube-proxy's).
AUDIT_OWN = {'plugins/module_utils/_audit/owners.py': ('cni',)}


def python_files(paths):
    for path in paths:
        full = os.path.join(ROOT, path)
        if os.path.isdir(full):
            for name in sorted(os.listdir(full)):
                if name.endswith('.py'):
                    yield os.path.join(path, name)
        else:
            yield path


def code_words(tree):
    """Identifiers and string constants, without docstrings and the module documentation (DOCUMENTATION, ...)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.isupper() and t.id in (
                'DOCUMENTATION', 'EXAMPLES', 'RETURN') for t in node.targets):
            skip.add(id(node.value))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == 'DAEMONS' for t in node.targets):
            skip.update(id(n) for n in ast.walk(node.value))     # the registry line
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith('._daemons'):
            skip.update(id(alias) for alias in node.names)      # the registry's imports of the descriptors
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.alias):
            yield getattr(node, 'lineno', 0), node.name


def yaml_words(data):
    if isinstance(data, dict):
        for key, value in data.items():
            yield str(key)
            yield from yaml_words(value)
    elif isinstance(data, list):
        for item in data:
            yield from yaml_words(item)
    elif isinstance(data, str):
        yield data


def test_no_code_but_a_daemon_s_own_files_and_its_registry_line_names_it():
    found = []
    for path in python_files(GENERIC):
        with open(os.path.join(ROOT, path)) as handle:
            tree = ast.parse(handle.read())
        for line, word in code_words(tree):
            if any(name in word.lower() for name in BUILT_IN if name not in AUDIT_OWN.get(path, ())):
                found.append('%s:%s: %r' % (path, line, word))
    for folder in ROLE_FILES:
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            with open(os.path.join(ROOT, folder, name)) as handle:
                data = yaml.safe_load(handle)
            found += ['%s/%s: %r' % (folder, name, word) for word in yaml_words(data)
                      if any(n in word.lower() for n in BUILT_IN)]
    assert found == []


def test_the_audit_s_documentation_names_every_owner():
    """snat_sources documents each owner and its clues (by hand): a daemon whose owner it lacks fails here."""
    from ansible_collections.ipmasq.agent.plugins.modules import snat_sources
    doc = yaml.safe_load(snat_sources.DOCUMENTATION)
    text = ' '.join(doc['description'])
    assert [name for name in owners.OWNERS if 'V(%s)' % name not in text] == []
