"""The options table (plugins/module_utils/_core/model/options.py) is the one
declaration of each policy option: what is derived from it is derived, and
the two files that stay files (the role's meta/argument_specs.yml and
masq_chain's DOCUMENTATION, which ansible-doc reads) agree with it on every
name, type, element type, default, choice and version."""
import ast
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config import config
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import OPTIONS, module_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _documentation(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'DOCUMENTATION':
            return yaml.safe_load(node.value.value)
    raise AssertionError('no DOCUMENTATION in %s' % path)


def _role_options():
    with open(os.path.join(ROOT, 'roles', 'ip_masq', 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)['argument_specs']['ip_masq']['options']


def _facts(entry, default_key='default'):
    """What must agree: type, element type, default, choices, version_added (documentation aside)."""
    return {'type': entry.get('type', 'str'), 'elements': entry.get('elements'), 'default': entry.get(default_key),
            'choices': list(entry['choices']) if entry.get('choices') else None,
            'version_added': str(entry['version_added']) if entry.get('version_added') else None}


def _table(option, role=False):
    return {'type': option.type, 'elements': option.elements,
            'default': option.role_default if role else option.default,
            'choices': list(option.choices) if option.choices else None, 'version_added': option.version_added}


@pytest.mark.parametrize('option', [o for o in OPTIONS if o.module], ids=lambda o: o.name)
def test_masq_chain_documents_each_option_as_the_table_declares_it(option):
    documented = _documentation('plugins/modules/masq_chain.py')['options']
    assert option.name in documented
    assert _facts(documented[option.name]) == _table(option)


def test_masq_chain_documents_no_option_the_table_lacks():
    documented = _documentation('plugins/modules/masq_chain.py')['options']
    assert sorted(documented) == sorted(o.name for o in OPTIONS if o.module)


@pytest.mark.parametrize('option', [o for o in OPTIONS if o.role], ids=lambda o: o.name)
def test_the_role_spec_declares_each_option_as_the_table_does(option):
    spec = _role_options()
    assert option.role in spec, option.role
    role = _facts(spec[option.role])
    table = _table(option, role=True)
    if option.name not in ('state',):
        # The role's own version_added is its own history (the role came with 1.0.0).
        role.pop('version_added')
        table.pop('version_added')
    assert role == table


def test_the_role_defaults_are_the_table_s():
    with open(os.path.join(ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml'), encoding='utf-8') as handle:
        defaults = yaml.safe_load(handle)
    for option in OPTIONS:
        if option.role:
            assert defaults[option.role] == option.role_default, option.role


def test_what_is_derived_is_the_table_s():
    assert module_spec()['ipv6'] == {'type': 'bool', 'default': False}
    assert module_spec()['nonmasquerade_cidrs'] == {'type': 'list', 'elements': 'str'}
    assert config.CONFIG_FIELDS == tuple((o.key, o.name) for o in OPTIONS if o.key and not o.extension)
    assert [key for key, _name in config.CONFIG_FIELDS] == [
        'nonMasqueradeCIDRs', 'masqLinkLocal', 'masqLinkLocalIPv6', 'resyncInterval', 'cidrLimit']
    assert [key for key, _name in config.EXTENSION_FIELDS] == [
        'exceptionCIDRs', 'masqueradeCIDRs', 'snatTo', 'snatToRequireLocal', 'sourceCIDRs', 'outInterfaces']
    assert options.DEFAULTS['chain'] == 'IP-MASQ-AGENT' and options.DEFAULTS['cidr_limit'] == 64
    # Every module option of the table is masq_chain's and the node's chain part's.
    assert set(options.POLICY_OPTIONS) | {'backend', 'adopt_chain', 'state'} == set(module_spec())


def test_the_flag_hints_of_the_config_reader_come_from_the_table():
    warnings = config.parse_config('enableIPv6: true\nmasq-chain: X\nnonMasqueradeCIDRs: [10.0.0.0/8]\n')[1]
    assert any('--enable-ipv6' in w for w in warnings) and any('--masq-chain' in w for w in warnings)


def test_the_table_is_cheap_to_import():
    """The resync imports it every cycle: standard library only, nothing compiled at import."""
    code = ('import sys; sys.path.insert(0, %r); '
            'from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options; '
            'print(sorted(m for m in ("re", "json", "collections", "ipaddress", "subprocess") if m in sys.modules))'
            % os.path.join(ROOT, 'build', 'collections'))
    out = subprocess.run([sys.executable, '-S', '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == '[]'
