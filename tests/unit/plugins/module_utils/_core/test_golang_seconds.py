"""Nanoseconds to seconds has one home, golang.parse_duration (a Go duration
in seconds, an int when whole): the go_duration filter and the role's resync
timer (_role_args) both take it, and no other file of plugins/ spells a
second in nanoseconds."""
import ast
import os

import pytest

from ansible_collections.ipmasq.agent.plugins.filter.go_duration import go_duration
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config import golang
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _role_args

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 5))
HOME = os.path.join('plugins', 'module_utils', '_core', 'upstream_config', 'golang.py')


@pytest.mark.parametrize('text, seconds', [
    ('60s', 60), ('1m', 60), ('1.5s', 1.5), ('1ms', 0.001), ('1ns', 1e-9), ('0s', 0), ('-5s', -5), ('2h', 7200),
])
def test_seconds_whole_as_int_else_float(text, seconds):
    got = golang.parse_duration(text)
    assert got == seconds and isinstance(got, int if seconds == int(seconds) else float)


@pytest.mark.parametrize('text', ['60s', '1m30s', '1.5s', '250ms', '1h', '-5s', '1ns'])
def test_the_filter_and_the_timer_take_it(text):
    assert go_duration(text) == golang.parse_duration(text)
    finding, timer = _role_args._timer(text)
    seconds = golang.parse_duration(text)
    ms = int(round(seconds * 1000))
    if ms <= 0:
        assert timer is None and finding is not None
    else:
        assert finding is None and timer == ('%ds' % (ms // 1000) if ms % 1000 == 0 else '%dms' % ms)


def test_no_other_file_spells_a_second_in_nanoseconds():
    found = []
    assert os.path.isfile(os.path.join(ROOT, HOME))
    for directory, _dirs, files in os.walk(os.path.join(ROOT, 'plugins')):
        for name in files:
            path = os.path.join(directory, name)
            if not name.endswith('.py') or os.path.relpath(path, ROOT) == HOME:
                continue
            with open(path, encoding='utf-8') as handle:
                tree = ast.parse(handle.read(), path)
            found += [(os.path.relpath(path, ROOT), node.lineno) for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and node.value == 10 ** 9 and not isinstance(node.value, bool)]
    assert found == []
