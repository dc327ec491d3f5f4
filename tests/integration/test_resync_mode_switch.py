"""ip_masq_resync_mode on the role (issue 36): the whole role run in a
network namespace of the test's with every node path below its temporary
directory and systemctl left out (this machine's systemd, /etc and /run are
never touched), switching timer -> watch -> timer leaves exactly the units
of the mode asked for (no stale timer beside a watcher, no stale watcher
beside a timer), check mode tells the switch and changes nothing, and
ip_masq_state: absent removes every unit of either mode. The watch units also
pass ``systemd-analyze verify``.

A switch is one all-or-nothing change of the role's node run: the new mode's
unit files written, the old mode's removed, with the enable links of the
units the new mode no longer enables (what ``systemctl disable`` removes), so
that a run cut off after the node run leaves exactly the new mode's files,
and a node run that fails at its last change (a read-only directory of the
test's, EROFS from the kernel) leaves the old mode's files exactly as they
were. Check mode with diff says what the switch would do, in that one task."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units
from ipmasq_lab import netlab

HERE = os.path.dirname(os.path.abspath(__file__))
ROLE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'resync_role.yml')
TIMER_UNITS = ['ip-masq-agent.path', 'ip-masq-agent.service', 'ip-masq-agent.timer']
WATCH_UNITS = ['ip-masq-agent-reload.service', 'ip-masq-agent.path', 'ip-masq-agent.service']
NODE_TASK = 'Validate, write the agent\'s files, apply the policy and audit, in one node run'
TIMER_LINK = 'timers.target.wants/ip-masq-agent.timer'
WATCH_LINK = 'multi-user.target.wants/ip-masq-agent.service'
SYSTEMD_ANALYZE = shutil.which('systemd-analyze')


@pytest.fixture
def node_ns():
    with netlab.Netns('mode') as ns:
        yield ns


def run(ns, values, check_mode=False):
    rc, tasks = netlab.playbook(ns, ROLE_PLAYBOOK, extra_vars=dict(values), check_mode=check_mode)
    assert rc == 0, [(name, result.get('msg')) for name, result in tasks if result.get('failed')]
    return tasks


def changed(tasks):
    return [name.split(' : ', 1)[-1] for name, result in tasks if result.get('changed')]


def node_run(tasks):
    return [result for name, result in tasks if name.endswith(NODE_TASK)][0]


def removed(tasks):
    """The paths the role's node run removed (or, in check mode, would remove)."""
    items = (node_run(tasks).get('files') or {}).get('files') or []
    return [i['path'] for i in items if i['changed'] and i['state'] == 'absent']


def unit_files(values):
    return sorted(os.listdir(values['ip_masq_unit_dir']))


def read(values, name):
    with open(os.path.join(values['ip_masq_unit_dir'], name), encoding='utf-8') as handle:
        return handle.read()


def test_switching_timer_watch_timer_leaves_exactly_the_mode_s_units_and_absent_removes_all(tmp_path, node_ns):
    values = netlab.role_node_paths(tmp_path)
    run(node_ns, values)
    assert unit_files(values) == TIMER_UNITS
    assert '--mode' not in read(values, 'ip-masq-agent.service')

    # timer -> watch, in check mode first: it tells the switch and writes nothing.
    watch = dict(values, ip_masq_resync_mode='watch')
    timer_path = os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent.timer')
    tasks = run(node_ns, watch, check_mode=True)
    assert removed(tasks) == [timer_path], changed(tasks)
    assert unit_files(values) == TIMER_UNITS and '--mode' not in read(values, 'ip-masq-agent.service')
    tasks = run(node_ns, watch)
    assert removed(tasks) == [timer_path]
    assert unit_files(values) == WATCH_UNITS
    service = read(values, 'ip-masq-agent.service')
    assert 'Type=simple' in service.splitlines() and '  --mode "watch" \\' in service.splitlines()
    assert 'Unit=ip-masq-agent-reload.service' in read(values, 'ip-masq-agent.path').splitlines()
    # Nothing more to do: the same run again changes nothing, in check mode neither.
    assert changed(run(node_ns, watch)) == []
    assert changed(run(node_ns, watch, check_mode=True)) == []

    # watch -> auto: the same units, only the flag changes (no switch).
    tasks = run(node_ns, dict(values, ip_masq_resync_mode='auto'))
    assert removed(tasks) == [] and unit_files(values) == WATCH_UNITS
    assert '  --mode "auto" \\' in read(values, 'ip-masq-agent.service').splitlines()

    # -> timer: the reload unit goes, the timer is back, the service is the oneshot of before.
    tasks = run(node_ns, values)
    assert removed(tasks) == [os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent-reload.service')]
    assert unit_files(values) == TIMER_UNITS
    service = read(values, 'ip-masq-agent.service')
    assert 'Type=oneshot' in service.splitlines() and '--mode' not in service and '[Install]' not in service
    assert changed(run(node_ns, values)) == []

    # watch again, then absent: every unit of either mode goes, and a stray one of the other mode too.
    run(node_ns, watch)
    with open(os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent.timer'), 'w', encoding='utf-8') as handle:
        handle.write('[Timer]\nOnUnitActiveSec=60s\n')
    run(node_ns, dict(watch, ip_masq_state='absent'))
    assert unit_files(values) == []
    assert not os.path.exists(values['ip_masq_lib_dir'])


def unit_tree(values):
    """Every file and link below the unit directory: {relative path: content or ('link', target)}."""
    top, tree = values['ip_masq_unit_dir'], {}
    for where, _dirs, names in os.walk(top):
        for name in names:
            path = os.path.join(where, name)
            if os.path.islink(path):
                tree[os.path.relpath(path, top)] = ('link', os.readlink(path))
            else:
                with open(path, 'rb') as handle:
                    tree[os.path.relpath(path, top)] = handle.read()
    return tree


def enable(values, link):
    """What ``systemctl enable`` leaves for a unit: a link in the target's .wants directory."""
    path = os.path.join(values['ip_masq_unit_dir'], link)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.join(values['ip_masq_unit_dir'], os.path.basename(link)), path)


def test_a_switch_is_one_all_or_nothing_change_of_the_node_run(tmp_path, node_ns):
    values = netlab.role_node_paths(tmp_path)
    run(node_ns, values)
    enable(values, TIMER_LINK)
    enable(values, 'paths.target.wants/ip-masq-agent.path')
    before = unit_tree(values)
    watch = dict(values, ip_masq_resync_mode='watch')

    # The node run fails at its last change: the timer's enable link is in a
    # directory the kernel refuses to write (read-only). Every file of the
    # timer's mode is exactly as it was, and the message names the path.
    wants = os.path.join(values['ip_masq_unit_dir'], 'timers.target.wants')
    rc, tasks = netlab.playbook(node_ns, ROLE_PLAYBOOK, extra_vars=watch, read_only=[wants])
    failed = [result.get('msg') or '' for _name, result in tasks if result.get('failed')]
    assert rc != 0 and len(failed) == 1 and 'timers.target.wants' in failed[0], failed
    assert unit_tree(values) == before

    # Check mode with diff: the node run tells the whole switch (written,
    # removed, with the contents) and changes nothing.
    rc, tasks = netlab.playbook(node_ns, ROLE_PLAYBOOK, extra_vars=watch, check_mode=True, diff=True)
    assert rc == 0
    node = node_run(tasks)
    timer_path = os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent.timer')
    link_path = os.path.join(values['ip_masq_unit_dir'], TIMER_LINK)
    assert sorted(removed(tasks)) == sorted([timer_path, link_path]), node.get('msg')
    assert 'would remove 2 files' in node['msg'] and timer_path in node['msg'], node['msg']
    diffs = dict((d.get('before_header'), d) for d in node.get('diff') or [])
    assert '[Timer]' in diffs[timer_path]['before'] and diffs[timer_path]['after'] == ''
    reload_path = os.path.join(values['ip_masq_unit_dir'], 'ip-masq-agent-reload.service')
    assert 'reload-or-restart' in diffs[reload_path]['after']
    assert unit_tree(values) == before

    # A run cut off right after the node run (only the files part: the
    # systemctl steps after it never ran) leaves exactly the watch mode's
    # files: no timer, no link of it, beside the watcher's units.
    run_ = netlab.playbook(node_ns, ROLE_PLAYBOOK, extra_vars=watch, args=['--tags', 'ip_masq_config'])
    assert run_[0] == 0
    after = unit_tree(values)
    assert sorted(after) == sorted(WATCH_UNITS + ['paths.target.wants/ip-masq-agent.path']), sorted(after)
    assert 'Type=simple' in after['ip-masq-agent.service'].decode().splitlines()

    # And back: the watcher's enable link goes with the reload unit, in the node run.
    enable(values, WATCH_LINK)
    rc, tasks = netlab.playbook(node_ns, ROLE_PLAYBOOK, extra_vars=values, args=['--tags', 'ip_masq_config'])
    assert rc == 0
    assert sorted(unit_tree(values)) == sorted(TIMER_UNITS + ['paths.target.wants/ip-masq-agent.path'])


def test_switching_the_resync_off_in_watch_mode_removes_the_watch_units(tmp_path, node_ns):
    values = dict(netlab.role_node_paths(tmp_path), ip_masq_resync_mode='watch')
    run(node_ns, values)
    assert unit_files(values) == WATCH_UNITS
    run(node_ns, dict(values, ip_masq_resync_enabled=False))
    assert unit_files(values) == []


@pytest.mark.parametrize('given', ['poll', 'Watch'])
def test_a_bad_mode_fails_naming_value_variable_and_host_before_anything_is_written(tmp_path, given):
    values = dict(netlab.role_node_paths(tmp_path), ip_masq_resync_mode=given)
    with netlab.Netns('badmode') as ns:
        rc, tasks = netlab.playbook(ns, ROLE_PLAYBOOK, extra_vars=values)
    assert rc != 0
    msgs = [result.get('msg') or '' for _name, result in tasks if result.get('failed')]
    assert any('ip_masq_resync_mode' in m and 'localhost' in m and given in m for m in msgs), msgs
    assert unit_files(values) == [] and not os.path.exists(values['ip_masq_config_path'])


@pytest.mark.parametrize('mode', ['watch', 'auto'])
def test_the_watch_units_pass_systemd_analyze_verify(tmp_path, mode):
    if SYSTEMD_ANALYZE is None:
        pytest.skip('systemd-analyze is not installed here')
    with open(os.path.join(netlab.ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml'), encoding='utf-8') as handle:
        values = dict(yaml.safe_load(handle), ip_masq_resync_mode=mode)
    root = _resync_code.resync_root(values['ip_masq_lib_dir'])
    units = _units.units(values, '60s', root, 'Ansible managed')
    assert sorted(units) == WATCH_UNITS
    for name, text in units.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run([SYSTEMD_ANALYZE, 'verify', '--man=no'] + [str(tmp_path / name) for name in units],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=120,
                          env=dict(os.environ, SYSTEMD_LOG_LEVEL='debug'), check=False)
    if proc.returncode != 0 and 'Failed to initialize manager' in proc.stderr:
        pytest.skip('systemd-analyze cannot run here: %s' % proc.stderr.strip().splitlines()[-1])
    problems = [line for line in proc.stderr.splitlines()
                if str(tmp_path) in line and re.search(r'\.(service|path):\d+:', line)
                and 'Failed to parse system call, ignoring' not in line]
    assert proc.returncode == 0 and problems == [], proc.stderr[-3000:]
