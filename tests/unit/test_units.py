"""The resync's systemd units, rendered in Python on the controller
(plugins/plugin_utils/_units.py): byte for byte what the role's templates
wrote (units_golden/), and their ExecStart and the resync's own command line
(_core/agent/resync.py) both derived from the options table, so that the policy
the resync builds from the unit's flags and the config file is the policy
the module builds from the same settings, for every option."""
import json
import os
import shlex

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import layout as iptables_layout, rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import OPTIONS, POLICY_OPTIONS, RESYNC_FLAG_OPTIONS
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units
from ansible_collections.ipmasq.agent.plugins.plugin_utils._config_file import config_text
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import read

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, 'units_golden')
ROLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'roles', 'ip_masq')
with open(os.path.join(ROLE, 'defaults', 'main.yml'), encoding='utf-8') as _f:
    DEFAULTS = yaml.safe_load(_f)
with open(os.path.join(GOLDEN, 'cases.json'), encoding='utf-8') as _f:
    CASES = json.load(_f)['cases']


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_the_units_are_byte_for_byte_what_the_templates_wrote(case):
    values = dict(DEFAULTS, **dict((k, v) for k, v in case.items() if k.startswith('ip_masq_')))
    got = _units.units(values, case['timer'], resync_root(values['ip_masq_lib_dir']), 'Ansible managed')
    # The timer's units (the default ip_masq_resync_mode; tests/unit/test_units_modes.py: the others).
    assert sorted(got) == sorted(_units.mode_units('timer'))
    # Changes since the templates: PYTHONPATH names this version's own root below
    # ip_masq_lib_dir (<lib>/v/<id>, issue 34), not ip_masq_lib_dir itself.
    version_root = os.path.relpath(resync_root(values['ip_masq_lib_dir']), values['ip_masq_lib_dir'])
    for name in _units.mode_units('timer'):
        with open(os.path.join(GOLDEN, case['name'], name), encoding='utf-8') as f:
            want = f.read()
        if name == 'ip-masq-agent.service':
            # And the resync's module is in the core's folders (agent/resync.py).
            assert want.count('" "LC_ALL=C"\n') == 1 and want.count('._core.resync import main') == 1  # move_core: keep
            want = want.replace('" "LC_ALL=C"\n', '/%s" "LC_ALL=C"\n' % version_root)
            want = want.replace('._core.resync import main', '._core.agent.resync import main')  # move_core: keep
            # The unit starts the resync from its root's one compiled file (_core/agent/boot.py).
            want = want.replace('-c "from %s import main' % _resync_code.ENTRY, '-c "from %s import main' % _resync_code.START)
            # The resync's mode (issue 36) is not there: the timer's, the resync's default, is left out.
        assert got[name] == want, name


def test_the_service_runs_from_the_root_it_is_given(monkeypatch):
    """The action computes the version's root once per host run and passes it:
    the units do not compute it again."""
    def again(_path):
        raise AssertionError('resync_root computed a second time')
    monkeypatch.setattr(_resync_code, 'resync_root', again)
    got = _units.units(DEFAULTS, '60s', '/given/v/0123', 'm')
    assert '"PYTHONPATH=/given/v/0123"' in got[_units.SERVICE]


def exec_argv(service):
    """The resync's arguments in ExecStart=, unquoted as systemd does (specifiers and variables too)."""
    line = [line for line in service.replace('\\\n', ' ').splitlines() if line.startswith('ExecStart=')][0]
    argv = [a.replace('$$', '$').replace('%%', '%') for a in shlex.split(line[len('ExecStart='):])]
    return argv[argv.index('-c') + 2:]


def resync_policy(checked):
    """The policy the resync builds from the role's config file and the unit's ExecStart."""
    values, facts = checked['values'], checked['facts']
    service = _units.units(values, checked['timer'], resync_root(values['ip_masq_lib_dir']), 'm')[_units.SERVICE]
    opts = resync.parse_args(exec_argv(service))
    return resync._settings(config_text(values, facts, 'm'), opts)[2], opts  # pylint: disable=protected-access


def module_policy(checked):
    args = checked['masq_chain']
    return Policy(**dict((key, args[key]) for key in POLICY_OPTIONS if key in args))


def view(policy):
    """What the policy writes: its chain, jump, families and every family's rules."""
    return {'chain': policy.chain, 'jump_position': policy.jump_position, 'ipv6': policy.ipv6,
            'rule_format': policy.rule_format,
            'rules': {family: iptables_rules.chain_rules(policy, family, iptables_layout.random_fully(policy, (1, 8, 9)))
                      for family in policy.families()}}


# A value other than the default for every option the resync takes as a flag.
OTHER = {'chain': 'MY-CHAIN', 'jump_position': 'first', 'rule_format': 'upstream', 'backend': 'nftables',
         'resync_interval': '1m30s', 'resync_mode': 'watch', 'nomasq_all_reserved_ranges': True, 'ipv6': True,
         'random_fully': True,
         'to_ports': ['1024-29999', '32768-65535']}


def test_every_resync_flag_has_another_value_here():
    """OTHER covers the table: a new flag option must be added to it (and so is tested below)."""
    assert sorted(OTHER) == sorted(o.name for o in RESYNC_FLAG_OPTIONS)


@pytest.mark.parametrize('name', sorted(OTHER))
def test_each_flag_option_reaches_the_resync_as_the_module_gets_it(name):
    option = options.BY_NAME[name]
    checked = role_args(read(dict(DEFAULTS, **{option.role: OTHER[name]}), 'h'))
    policy, opts = resync_policy(checked)
    # The parsed flag is the typed value the controller checked.
    parsed = getattr(opts, resync.flag_attr(option.resync_flag))
    want = ','.join(OTHER[name]) if option.type == 'list' else OTHER[name]
    assert parsed == want
    assert view(policy) == view(module_policy(checked))
    if option.module and name != 'backend':
        assert view(policy) != view(module_policy(role_args(read(dict(DEFAULTS), 'h')))), 'the value changed nothing'


def test_the_unit_passes_exactly_the_table_s_flags_and_the_resync_knows_each():
    # (The timer's mode, the default, is left out of ExecStart: watch passes every flag.)
    checked = role_args(read(dict(DEFAULTS, ip_masq_metrics_dir='/srv/m', ip_masq_random_fully=True,
                                  ip_masq_resync_mode='watch'), 'h'))
    service = _units.units(checked['values'], checked['timer'], resync_root(checked['values']['ip_masq_lib_dir']),
                           'm')[_units.SERVICE]
    given = [a.partition('=')[0] for a in exec_argv(service) if a.startswith('--')]
    assert sorted(given) == sorted(['--config', '--state-file', '--metrics-dir']
                                   + [o.resync_flag for o in RESYNC_FLAG_OPTIONS])
    table = resync.flags()
    assert set(given) <= set(table)


def test_usage_and_help_name_every_flag_and_the_registry_s_backends():
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends  # pylint: disable=import-outside-toplevel
    usage, text = resync.usage(), resync.help_text()
    for flag in resync.flags():
        assert flag in text and (flag in usage or flag in ('--verbose', '--help')), flag
    assert '[--backend %s]' % '|'.join(backends.BACKENDS) in usage
    assert 'default %s)' % options.DEFAULT_CHAIN in text
    for option in OPTIONS:
        if option.resync_flag:
            assert option.help and option.help[0] % {'default': option.default} in text, option.name


def test_the_role_restates_nothing_the_action_computes():
    """The resync's paths (units, tmpfiles.d entry, last good config, metrics
    file) come from the action's result (resync_files), not from role vars:
    the role has no vars/main.yml, and its tasks name no such variable."""
    assert not os.path.exists(os.path.join(ROLE, 'vars', 'main.yml'))
    for directory, _dirs, files in os.walk(os.path.join(ROLE, 'tasks')):
        for name in files:
            with open(os.path.join(directory, name), encoding='utf-8') as handle:
                text = handle.read()
            for restated in ('__ip_masq_unit_names', '__ip_masq_unit_paths', '__ip_masq_tmpfiles',
                             '__ip_masq_last_good', '__ip_masq_code_dir', '__ip_masq_default_cidrs'):
                assert restated not in text, (name, restated)
