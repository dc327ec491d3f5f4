"""The DOCUMENTATION of every CIDR filter and test plugin says what the code does:
same name as the file, same options and defaults as the function, and every
documented choice is accepted while an undocumented one is refused."""
import importlib
import inspect

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from test_filters_without_netaddr import cidr_plugins


def test_the_cidr_plugins_are_found():
    assert len(cidr_plugins()) == 9


def load(kind, name):
    module = importlib.import_module('ansible_collections.ipmasq.agent.plugins.%s.%s' % (kind, name))
    table = module.FilterModule().filters() if kind == 'filter' else module.TestModule().tests()
    assert list(table) == [name], 'one plugin per file, named as the file'
    return module, table[name]


@pytest.mark.parametrize('kind,name', cidr_plugins(), ids=str)
def test_documentation_matches_the_function(kind, name):
    module, func = load(kind, name)
    doc = yaml.safe_load(module.DOCUMENTATION)
    assert doc['name'] == name
    assert yaml.safe_load(module.EXAMPLES) and yaml.safe_load(module.RETURN)['_value']
    params = list(inspect.signature(func).parameters.values())
    documented = dict(doc['options'])
    assert documented.pop('_input')['required'] is True
    assert sorted(documented) == sorted(p.name for p in params[1:])
    positional = [p.strip() for p in doc['positional'].split(',')]
    assert positional[0] == '_input'
    assert positional[1:] == [p.name for p in params[1:] if p.kind == p.POSITIONAL_OR_KEYWORD]
    for param in params[1:]:
        spec = documented[param.name]
        if param.default is param.empty:
            assert spec.get('required') is True, param.name
        else:
            assert spec.get('default') == param.default, param.name


SAMPLE = {'filter': ['10.0.0.0/8'], 'test': '10.0.0.0/8'}
# The filters whose input is not a list of CIDRs.
SAMPLES = {'snat_to': ['203.0.113.7']}


@pytest.mark.parametrize('kind,name', cidr_plugins(), ids=str)
def test_documented_choices_are_exactly_the_accepted_ones(kind, name):
    module, func = load(kind, name)
    doc = yaml.safe_load(module.DOCUMENTATION)
    required = [p for p in list(inspect.signature(func).parameters.values())[1:] if p.default is p.empty]
    args = [SAMPLES.get(name, SAMPLE[kind])] + [['10.0.0.0/8']] * len(required)
    for option, spec in doc['options'].items():
        if 'choices' not in spec:
            continue
        for choice in spec['choices']:
            func(*args, **{option: choice})
        with pytest.raises(AnsibleFilterError, match='option %s must be' % option):
            func(*args, **{option: 'not-a-choice'})
