"""The audit's gate (playbooks/audit.yml) fails closed: every row of its exit
status table (docs/docsite/rst/troubleshooting.rst, "Exit status, for a CI
gate") run for real with ansible-playbook over SSH against a two-host fleet
(tests/lab/ipmasq_lab/fleetlab.py). A host "down" is one whose sshd is cut
off by an nft table in its own namespace (connections reset at once).

Before every run a stale report (an earlier run's) lies at the report path:
a run writes its own report over it, or, where it writes none, removes it,
so that no run leaves an old answer in place (issue 32 item 7)."""
import json
import os

import pytest

from ipmasq_lab import fleetlab

DOCKER_RULE = ['-s', '172.17.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE']
CUT_SSH = '''table inet imq_cut_ssh {
  chain input {
    type filter hook input priority -10; policy accept;
    tcp dport 22 reject with tcp reset
  }
}
'''
STALE = {'stale': 'an earlier run', 'off_policy_hosts': [], 'unreachable_hosts': []}
GATE_ON = {'ip_masq_report_fail': True}
IGNORE = {'ip_masq_report_unreachable': 'ignore'}

# id: (findings on east-1, hosts cut off, hosts with bad settings, extra vars,
#      exit status, the report: None (none written) or (off_policy_hosts, unreachable_hosts, no_host_answered))
ROWS = {
    'all-fine': ((), (), (), GATE_ON, 0, ([], [], False)),
    'findings-gate-on': (('docker',), (), (), GATE_ON, 2, (['east-1'], [], False)),
    'findings-gate-on-as-the-role-reads-t': (('docker',), (), (), {'ip_masq_report_fail': 't'}, 2,
                                             (['east-1'], [], False)),
    'findings-gate-off': (('docker',), (), (), {}, 0, (['east-1'], [], False)),
    'some-unreachable-ignore': ((), ('west-1',), (), dict(GATE_ON, **IGNORE), 0, ([], ['west-1'], False)),
    'some-unreachable-ignore-with-findings': (('docker',), ('west-1',), (), dict(GATE_ON, **IGNORE), 2,
                                              (['east-1'], ['west-1'], False)),
    'some-unreachable-fail': ((), ('west-1',), (), GATE_ON, 4, (['west-1'], ['west-1'], False)),
    'some-unreachable-fail-gate-off': ((), ('west-1',), (), {}, 4, (['west-1'], ['west-1'], False)),
    'none-answering-ignore': ((), ('east-1', 'west-1'), (), dict(GATE_ON, **IGNORE), 4,
                              (['east-1', 'west-1'], ['east-1', 'west-1'], True)),
    'none-answering-ignore-gate-off': ((), ('east-1', 'west-1'), (), IGNORE, 4,
                                       (['east-1', 'west-1'], ['east-1', 'west-1'], True)),
    'none-answering-fail': ((), ('east-1', 'west-1'), (), GATE_ON, 4,
                            (['east-1', 'west-1'], ['east-1', 'west-1'], True)),
    'a-host-with-bad-settings': ((), (), ('east-1',), {}, 2, (['east-1'], [], False)),
    'bad-settings-and-the-other-unreachable-ignore': ((), ('west-1',), ('east-1',), IGNORE, 4,
                                                      (['east-1', 'west-1'], ['west-1'], True)),
    'every-host-with-bad-settings': ((), (), ('east-1', 'west-1'), {}, 2, None),
    'bad-ip_masq_report_unreachable': ((), (), (), {'ip_masq_report_unreachable': 'sometimes'}, 2, None),
    'bad-ip_masq_report_fail': ((), (), (), {'ip_masq_report_fail': 'ture'}, 2, None),
}


@pytest.fixture(scope='module')
def fleet():
    with fleetlab.Fleet(clusters=(('cluster_east', 1), ('cluster_west', 1))) as made:
        run = made.playbook('site.yml')
        assert run.rc == 0, run.explain()
        yield made


def failed_hosts(run):
    """Hosts a task failed on (not unreachable)."""
    return sorted({h for _n, hosts in run.tasks for h, r in hosts.items() if r.get('failed') and not r.get('unreachable')})


@pytest.mark.parametrize('row', sorted(ROWS))
def test_every_row_of_the_exit_status_table(fleet, row):
    findings, cut, bad, extra, rc, want = ROWS[row]
    out = os.path.join(fleet.dir, 'report')
    with open(out + '.json', 'w') as handle:
        json.dump(STALE, handle)
    with open(out + '.md', 'w') as handle:
        handle.write('# SNAT report\n\nan earlier run\n')
    for name in bad:
        fleet.write_host_vars(fleet.host(name), ip_masq_backend='pf')
    if findings:
        fleet.host('east-1').ipt('-I', 'POSTROUTING', *DOCKER_RULE)
    for name in cut:
        fleet.host(name).ns.exec(['nft', '-f', '-'], input=CUT_SSH)
    try:
        run = fleet.playbook('audit.yml', extra_vars=dict(extra, ip_masq_report_path=out))
    finally:
        for name in cut:
            fleet.host(name).ns.exec(['nft', 'delete', 'table', 'inet', 'imq_cut_ssh'])
        if findings:
            fleet.host('east-1').ipt('-D', 'POSTROUTING', *DOCKER_RULE)
        for name in bad:
            fleet.write_host_vars(fleet.host(name))
    assert run.rc == rc, run.explain()
    if want is None:
        assert not os.path.exists(out + '.json') and not os.path.exists(out + '.md'), 'a stale report was left'
        return
    off_policy, unreachable, no_answer = want
    with open(out + '.json') as handle:
        report = json.load(handle)
    with open(out + '.md') as handle:
        markdown = handle.read()
    assert 'stale' not in report and 'an earlier run' not in markdown
    assert (report['off_policy_hosts'], report['unreachable_hosts']) == (off_policy, unreachable)
    assert report['gate'].get('no_host_answered', False) is no_answer
    assert ('**No host answered**' in markdown) is no_answer
    assert report['totals']['hosts'] == 2
    # What Ansible's recap says agrees: the unreachable hosts the gate fails are unreachable there (exit 4),
    # the others only ignored; the off-policy hosts that answered fail with the gate on.
    gate_fails_unreachable = extra.get('ip_masq_report_unreachable', 'fail') == 'fail' or no_answer
    for name in unreachable:
        assert run.stats[name]['unreachable'] == int(gate_fails_unreachable), run.stats
    gate_on = str(extra.get('ip_masq_report_fail', False)).lower() in ('true', 't')
    answered_off = [h for h in off_policy if h not in unreachable]
    assert failed_hosts(run) == sorted(set(bad) | (set(answered_off) if gate_on else set(bad))), run.explain()


# ip_masq_resync_enabled=t, given three ways: the report judges each host's resync as the role reads the
# variable (its argument spec: t is true, f false), where Jinja's bool filter says false for 't'.
RESYNC_GIVEN = {
    'extra-var': {'args': ('-e', 'ip_masq_resync_enabled=t'), 'want': {'east-1': True, 'west-1': True}},
    'inventory-string': {'ini': '[ip_masq_nodes]\neast-1 ip_masq_resync_enabled=t\nwest-1 ip_masq_resync_enabled=f\n',
                         'want': {'east-1': True, 'west-1': False}},
    'yaml': {'host_vars': {'east-1': 'ip_masq_resync_enabled: t\n', 'west-1': 'ip_masq_resync_enabled: f\n'},
             'want': {'east-1': True, 'west-1': False}},
}


@pytest.mark.parametrize('given', sorted(RESYNC_GIVEN))
def test_resync_enabled_is_judged_as_the_role_reads_it(fleet, given):
    how = RESYNC_GIVEN[given]
    out = os.path.join(fleet.dir, 'report-resync-' + given)
    args = list(how.get('args', ()))
    written = []
    if 'ini' in how:
        ini = os.path.join(fleet.dir, 'resync.ini')
        with open(ini, 'w') as handle:
            handle.write(how['ini'])
        written.append(ini)
        args += ['-i', fleet.inventory, '-i', ini]
    for name, line in how.get('host_vars', {}).items():
        # The host's vars as block YAML (each value in flow style), the line as a user writes it, unquoted.
        values = fleet.host_vars(fleet.host(name))
        with open(os.path.join(fleet.inventory, 'host_vars', name + '.yml'), 'w') as handle:
            handle.write('---\n' + ''.join('%s: %s\n' % (key, json.dumps(value)) for key, value in values.items()) + line)
    try:
        run = fleet.playbook('audit.yml', *args, extra_vars={'ip_masq_report_path': out})
    finally:
        for path in written:
            os.unlink(path)
        for name in how.get('host_vars', {}):
            fleet.write_host_vars(fleet.host(name))
    assert run.rc == 0, run.explain()
    with open(out + '.json') as handle:
        report = json.load(handle)
    settings = run.results('Validate the settings on the controller')
    for name, on in sorted(how['want'].items()):
        # The role's reading (its action's typed settings) and the report's judgement agree.
        assert settings[name]['settings']['ip_masq_resync_enabled'] is on, settings[name]
        # The fleet's hosts do not ask systemctl (ip_masq_resync_systemctl false): on is "not checked".
        assert report['hosts'][name]['resync'] == ('not checked' if on else 'off'), report['hosts'][name]
        assert report['hosts'][name]['findings'] == []
