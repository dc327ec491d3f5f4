"""The resync's units per ``ip_masq_resync_mode`` (issue 36): timer keeps
today's three units (the service's ExecStart without ``--mode``, so a node
that stays on the timer gets the same unit), watch and auto run
ip-masq-agent.service as one long-running process (no timer; the path unit
starts a small oneshot that reloads it), what a switch removes in the node
run (the other mode's units and the enable links of the units the mode does
not enable, each read back from the [Install] of the unit that has it), what
it stops after (the other mode's units systemd still runs) and what the
removal stops, disables and removes (``_units.leaving``)."""
import json
import os
import shlex

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import layout as iptables_layout, rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import POLICY_OPTIONS
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units
from ansible_collections.ipmasq.agent.plugins.plugin_utils._config_file import config_text
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import RoleArgsError, role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import read
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ipmasq_lab.role_forms import _jinja  # pylint: disable=protected-access

HERE = os.path.dirname(os.path.abspath(__file__))
ROLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'roles', 'ip_masq')
with open(os.path.join(ROLE, 'defaults', 'main.yml'), encoding='utf-8') as _f:
    DEFAULTS = yaml.safe_load(_f)
SERVICE, TIMER, PATH_UNIT = 'ip-masq-agent.service', 'ip-masq-agent.timer', 'ip-masq-agent.path'
RELOAD = 'ip-masq-agent-reload.service'


def rendered(mode, **extra):
    checked = role_args(read(dict(DEFAULTS, ip_masq_resync_mode=mode, **extra), 'h'))
    values = checked['values']
    return checked, _units.units(values, checked['timer'], resync_root(values['ip_masq_lib_dir']), 'm')


def lines(text):
    return text.splitlines()


def section(text, name):
    """The lines of ``[name]`` of a unit."""
    out, inside = [], False
    for line in lines(text):
        if line.startswith('['):
            inside = line == '[%s]' % name
        elif inside and line and not line.startswith('#'):
            out.append(line)
    return out


def exec_argv(text, key='ExecStart='):
    """A unit's ``key`` line as systemd splits it (continuations joined, specifiers and variables unescaped)."""
    line = [line for line in text.replace('\\\n', ' ').splitlines() if line.startswith(key)][0]
    return [a.replace('$$', '$').replace('%%', '%') for a in shlex.split(line[len(key):])]


def view(policy):
    """What the policy writes: its chain, jump, families and every family's rules."""
    return {'chain': policy.chain, 'jump_position': policy.jump_position, 'ipv6': policy.ipv6,
            'rules': {family: iptables_rules.chain_rules(policy, family, iptables_layout.random_fully(policy, (1, 8, 9)))
                      for family in policy.families()}}


def resync_opts(service):
    argv = exec_argv(service)
    return resync.parse_args(argv[argv.index('-c') + 2:])


def test_timer_mode_is_today_s_three_units_without_a_mode_flag():
    checked, units = rendered('timer')
    assert sorted(units) == sorted([SERVICE, TIMER, PATH_UNIT])
    assert _units.UNIT_NAMES == (SERVICE, TIMER, PATH_UNIT, RELOAD)
    service = units[SERVICE]
    assert 'Type=oneshot' in lines(service) and 'TimeoutStartSec=120' in lines(service)
    assert '--mode' not in service and section(service, 'Install') == []
    assert resync_opts(service).mode is None            # the resync's default: one cycle, as before
    assert 'Unit=ip-masq-agent.service' in lines(units[PATH_UNIT])
    # The same text as the default (the mode left out) renders.
    values = dict(checked['values'])
    del values['ip_masq_resync_mode']
    assert _units.units(values, checked['timer'], resync_root(values['ip_masq_lib_dir']), 'm') == units


@pytest.mark.parametrize('mode', ['watch', 'auto'])
def test_watch_and_auto_run_one_long_running_service_and_no_timer(mode):
    checked, units = rendered(mode, ip_masq_resync_interval='90s', ip_masq_enable_ipv6=True,
                              ip_masq_jump_position='first')
    assert sorted(units) == sorted([SERVICE, PATH_UNIT, RELOAD])
    service = units[SERVICE]
    got = section(service, 'Service')
    for line in ('Type=simple', 'Restart=on-failure', 'RestartSec=1s', 'ExecReload=/bin/kill -HUP $MAINPID',
                 'SyslogIdentifier=ip-masq-agent', 'UMask=0077',
                 'RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6'):
        assert line in got, line
    assert not [line for line in got if line.startswith(('TimeoutStartSec=', 'Type=oneshot', 'RuntimeMaxSec='))]
    assert 'StartLimitIntervalSec=0' in section(service, 'Unit')
    assert section(service, 'Install') == ['WantedBy=multi-user.target']
    # The same hardening and sandbox as the timer's oneshot, line for line.
    _timer_checked, timer_units = rendered('timer', ip_masq_resync_interval='90s', ip_masq_enable_ipv6=True,
                                           ip_masq_jump_position='first')
    sandbox = [line for line in section(timer_units[SERVICE], 'Service')
               if not line.startswith(('Type=', 'TimeoutStartSec=', 'ExecStart=', ' '))]
    assert [line for line in sandbox if line not in got] == []
    # ExecStart: the resync's parser reads the mode, the interval (its safety net) and the policy.
    opts = resync_opts(service)
    assert opts.mode == mode and opts.resync_interval == '90s'
    settings_policy = resync._settings(config_text(checked['values'], checked['facts'], 'm'), opts)[2]  # pylint: disable=protected-access
    args = checked['masq_chain']
    assert view(settings_policy) == view(Policy(**dict((key, args[key]) for key in POLICY_OPTIONS if key in args)))
    # The config file's changes reach the watcher as a reload (SIGHUP), by a oneshot without a shell.
    assert 'Unit=%s' % RELOAD in lines(units[PATH_UNIT]) and section(units[PATH_UNIT], 'Install') == [
        'WantedBy=paths.target']
    reload_unit = units[RELOAD]
    assert 'Type=oneshot' in section(reload_unit, 'Service') and section(reload_unit, 'Install') == []
    assert exec_argv(reload_unit) == ['/bin/systemctl', 'reload-or-restart', SERVICE]


def test_watch_and_auto_differ_only_in_the_mode_flag():
    watch, auto = rendered('watch')[1], rendered('auto')[1]
    assert sorted(watch) == sorted(auto)
    assert watch[SERVICE].replace('"watch"', '"auto"').replace('mode: watch', 'mode: auto') == auto[SERVICE]
    assert watch[PATH_UNIT] == auto[PATH_UNIT] and watch[RELOAD] == auto[RELOAD]


@pytest.mark.parametrize('present,stop', [
    ([], []),
    # Every unit there, disabled where its mode enabled it (the timer and the path unit; in watch mode the service too).
    ([SERVICE, TIMER, PATH_UNIT], [(SERVICE, False), (TIMER, True), (PATH_UNIT, True)]),
    ([SERVICE, PATH_UNIT, RELOAD], [(SERVICE, True), (PATH_UNIT, True), (RELOAD, False)]),
    ([TIMER], [(TIMER, True)]),
])
def test_what_the_removal_stops_disables_and_removes(present, stop):
    assert _units.leaving(present) == {'stop': [{'name': n, 'disable': d} for n, d in stop],
                                       'remove': [n for n in _units.UNIT_NAMES if n in present]}


@pytest.mark.parametrize('mode,others,links,left', [
    # -> timer: the reload unit goes, and the watcher's enable link (the service stays, without [Install]).
    ('timer', [RELOAD], ['multi-user.target.wants/' + SERVICE], {SERVICE: 'written without [Install]'}),
    # -> watch or auto: the timer goes, with its enable link (its file is removed).
    ('watch', [TIMER], ['timers.target.wants/' + TIMER], {TIMER: 'removed'}),
    ('auto', [TIMER], ['timers.target.wants/' + TIMER], {TIMER: 'removed'}),
])
def test_a_switch_removes_the_other_mode_s_units_and_the_links_of_those_it_does_not_enable(mode, others, links, left):
    assert list(_units.others(mode)) == others
    assert list(_units.stale_links(mode)) == links
    # Each link is the one `systemctl enable` makes from the unit's own [Install] WantedBy=, in the mode that has it.
    other = 'watch' if mode == 'timer' else 'timer'
    root = resync_root(DEFAULTS['ip_masq_lib_dir'])
    units = _units.units(dict(DEFAULTS, ip_masq_resync_mode=other), '60s', root, 'm')
    written = _units.units(dict(DEFAULTS, ip_masq_resync_mode=mode), '60s', root, 'm')
    for link in links:
        target, name = link.split('.wants/')
        assert 'WantedBy=%s' % target in units[name].splitlines()
        # What this mode leaves of the unit the link points to: no file (the switch removes it), or a file
        # that nothing enables (no [Install]: `systemctl enable` would make no link).
        if left[name] == 'removed':
            assert name not in written and name in _units.others(mode), sorted(written)
        else:
            assert name in written and name not in _units.others(mode), sorted(written)
            assert '[Install]' not in written[name] and section(written[name], 'Install') == [], written[name]
    # The units this mode enables keep their links: each has its [Install] and no link of it is removed.
    for name in _units.started(mode):
        assert 'WantedBy=%s' % _units.WANTED_BY[name] in section(written[name], 'Install'), (name, written[name])
        assert '%s.wants/%s' % (_units.WANTED_BY[name], name) not in links


@pytest.mark.parametrize('mode,states,stop', [
    # Nothing runs, or only this mode's units: nothing to stop.
    ('watch', {}, []),
    ('timer', {TIMER: {'active': 'active'}, PATH_UNIT: {'active': 'active'}, SERVICE: {'active': 'inactive'}}, []),
    # A timer run of the oneshot in progress is not a watcher: it is left to end.
    ('timer', {SERVICE: {'active': 'activating'}}, []),
    ('watch', {SERVICE: {'active': 'active'}, PATH_UNIT: {'active': 'active'}}, []),
    # timer -> watch: the timer systemd still runs (its file gone, "not-found" after a reload).
    ('watch', {TIMER: {'active': 'active'}, SERVICE: {'active': 'activating'}}, [TIMER]),
    # watch -> timer: the watcher still runs; so may a reload of it.
    ('timer', {SERVICE: {'active': 'active'}, RELOAD: {'active': 'inactive'}}, [SERVICE]),
    # (the reload oneshot of the watch mode, mid-run, is "activating": left to end)
    ('auto', {TIMER: {'active': 'reloading'}, RELOAD: {'active': 'activating'}}, [TIMER]),
])
def test_what_a_switch_stops_is_read_from_systemd(mode, states, stop):
    assert _units.stopping(mode, states) == stop


@pytest.mark.parametrize('mode,states,reset', [
    ('watch', {}, []),
    # timer -> watch: the timer whose file went is "failed" (not-found, no trigger) after the reload.
    ('watch', {TIMER: {'active': 'failed'}, SERVICE: {'active': 'active'}}, [TIMER]),
    ('auto', {TIMER: {'active': 'failed'}}, [TIMER]),
    ('timer', {RELOAD: {'active': 'failed'}}, [RELOAD]),
    # A failed run of this mode's own units is the operator's to see: never cleared.
    ('timer', {SERVICE: {'active': 'failed'}, TIMER: {'active': 'failed'}}, []),
    ('watch', {SERVICE: {'active': 'failed'}, RELOAD: {'active': 'failed'}, TIMER: {'active': 'inactive'}}, []),
])
def test_what_a_switch_clears_is_the_other_mode_s_failed_units(mode, states, reset):
    assert _units.clearing(mode, states) == reset


@pytest.mark.parametrize('given', ['poll', 'Watch', '', 'true'])
def test_a_bad_mode_names_the_value_the_variable_and_the_host(given):
    with pytest.raises(RoleArgsError) as caught:
        role_args(read(dict(DEFAULTS, ip_masq_resync_mode=given), 'node-7'))
    text = caught.value.message
    assert 'ip_masq_resync_mode' in text and 'node-7' in text and 'timer, watch, auto' in text, text


@pytest.mark.parametrize('form', ['typed', 'kv', 'json', 'jinja'])
def test_every_form_of_the_mode_reaches_the_units(form):
    """Typed YAML (and group_vars), ``-e ip_masq_resync_mode=watch`` (a
    string), a JSON value and a Jinja expression: the action templates each
    value, then checks it; the units are the watcher's."""
    given = {'typed': 'watch', 'kv': 'watch', 'json': json.loads('"watch"'), 'jinja': _jinja('watch')}[form]
    templar = Templar(loader=DataLoader())
    checked = role_args(read(dict(DEFAULTS, ip_masq_resync_mode=templar.template(given)), 'h'))
    assert checked['values']['ip_masq_resync_mode'] == 'watch'
    values = checked['values']
    assert sorted(_units.units(values, checked['timer'], resync_root(values['ip_masq_lib_dir']), 'm')) == sorted(
        [SERVICE, PATH_UNIT, RELOAD])
