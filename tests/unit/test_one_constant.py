"""The default chain name, the CNI plugins' chain prefix and the resync's
unit names are each one constant (options.DEFAULT_CHAIN, from the options
table's row; cni_names.CHAIN_PREFIX; _units.UNIT_NAMES): no other Python
string of plugins/ spells them, nor a unit's path (``DIR/ip-masq-agent.service``)."""
import ast
import functools
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, 'plugins')
HOMES = {
    'IP-MASQ-AGENT': 'plugins/module_utils/_core/model/options.py',
    'CNI-': 'plugins/module_utils/_daemons/cni_names.py',
    'ip-masq-agent.service': 'plugins/plugin_utils/_units.py',
    'ip-masq-agent.timer': 'plugins/plugin_utils/_units.py',
    'ip-masq-agent.path': 'plugins/plugin_utils/_units.py',
    'ip-masq-agent-reload.service': 'plugins/plugin_utils/_units.py',
}
UNITS = ('ip-masq-agent.service', 'ip-masq-agent.timer', 'ip-masq-agent.path', 'ip-masq-agent-reload.service')


def spellings(literal):
    """``[(file, line)]`` of every string constant of plugins/ that is ``literal``."""
    return sorted((path, line) for path, line, value in _constants() if value == literal)


@functools.lru_cache(maxsize=None)
def _constants():
    """``(file, line, value)`` of every string constant of plugins/ (parsed once)."""
    found = []
    for directory, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding='utf-8') as handle:
                tree = ast.parse(handle.read(), path)
            found += [(os.path.relpath(path, ROOT), node.lineno, node.value) for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return tuple(found)


@pytest.mark.parametrize('literal', sorted(HOMES))
def test_spelled_once(literal):
    found = spellings(literal)
    assert [path for path, _line in found] == [HOMES[literal]], found


def test_the_constants_are_the_table_s_and_the_daemon_s():
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options, policy  # pylint: disable=import-outside-toplevel
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import cni_names  # pylint: disable=import-outside-toplevel
    assert options.DEFAULT_CHAIN == options.BY_NAME['chain'].default == policy.DEFAULT_CHAIN == 'IP-MASQ-AGENT'
    assert cni_names.CHAIN_PREFIX == 'CNI-'


@pytest.mark.parametrize('unit', UNITS)
def test_no_unit_path_is_spelled_by_hand(unit):
    """A unit's path is the unit directory joined to _units' name, never a string that restates it."""
    assert [(path, line) for path, line, value in _constants() if value.endswith('/' + unit)] == []


def test_the_unit_names_are_the_units():
    from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units  # pylint: disable=import-outside-toplevel
    assert _units.UNIT_NAMES == (_units.SERVICE, _units.TIMER, _units.PATH_UNIT, _units.RELOAD) == UNITS
