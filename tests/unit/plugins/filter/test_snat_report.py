"""The fleet report's classification (ipmasq.agent.snat_report): pure logic on
the module results playbooks/audit.yml collects; the playbook itself runs
against a real fleet in tests/integration/test_fleet_ssh.py."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.filter.snat_report import snat_report

OURS = {'owner': 'ip-masq-agent', 'family': 'ipv4', 'table': 'nat', 'chain': 'IP-MASQ-AGENT', 'rule': '-A ...',
        'reachable': True, 'allowed': True, 'allowed_by': 'ours'}
DOCKER = {'owner': 'docker', 'family': 'ipv4', 'table': 'nat', 'chain': 'POSTROUTING', 'path': ['POSTROUTING'],
          'rule': '-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE', 'reachable': True, 'allowed': False,
          'hint': 'set "ip-masq": false'}


def chain(changed=False, exists=True, actions=()):
    return {'changed': changed, 'actions': list(actions), 'backend': 'nf_tables', 'iptables_version': '1.8.9',
            'ipv4': {'managed': True, 'before': {'chain_exists': exists}}, 'ipv6': {'managed': False}}


def host(groups=('cluster_a',), ch=None, offenders=(), **extra):
    found = {'groups': list(groups), 'managed': True, 'chain': ch or chain(),
             'snat': {'only_ours': not offenders, 'sources': [OURS] + list(offenders), 'offenders': list(offenders)},
             'kernel': '6.1.0', 'resync_enabled': True, 'resync': 'active'}
    found.update(extra)
    return found


def test_a_host_in_place_is_ok_and_has_no_findings():
    report = snat_report({'a': host()})
    assert report['off_policy_hosts'] == []
    assert report['hosts']['a']['policy'] == 'ok' and report['hosts']['a']['findings'] == []
    assert report['hosts']['a']['chain'] == 'in place' and report['hosts']['a']['iptables'] == '1.8.9'


@pytest.mark.parametrize('ch,state', [
    (chain(True, False, ['IPv4: create chain IP-MASQ-AGENT']), 'missing'),
    (chain(True, True, ['IPv4: rewrite chain IP-MASQ-AGENT (0 rules -> 3 rules)']), 'drifted'),
])
def test_missing_or_drifted_chain_is_off_policy_with_what_to_do(ch, state):
    report = snat_report({'a': host(ch=ch)})
    found = report['hosts']['a']
    assert found['chain'] == state and found['policy'] == 'off-policy'
    assert ch['actions'][0] in found['findings'][0]['what'] and 'site.yml --limit a' in found['findings'][0]['do']


def test_another_snat_source_is_named_with_its_owner_and_hint():
    report = snat_report({'a': host(offenders=[DOCKER])})
    (finding,) = report['hosts']['a']['findings']
    assert finding['severity'] == 'off-policy' and finding['what'].startswith('docker SNAT rule in ipv4 nat')
    assert DOCKER['rule'] in finding['what'] and finding['do'] == DOCKER['hint']


def test_an_unreadable_host_is_off_policy():
    report = snat_report({'a': {}, 'b': host(chain={'failed': True, 'msg': 'iptables-save not found'})})
    assert report['off_policy_hosts'] == ['a', 'b']
    assert 'iptables-save not found' in report['hosts']['b']['findings'][0]['what']
    assert report['totals']['unreadable'] == 2


def test_inactive_resync_is_a_warning_only_where_the_resync_is_on():
    report = snat_report({'a': host(resync='inactive'), 'b': host(resync='off', resync_enabled=False),
                          'c': host(resync='not checked')})
    assert report['off_policy_hosts'] == []
    assert [f['severity'] for f in report['hosts']['a']['findings']] == ['warning']
    assert report['hosts']['b']['findings'] == [] and report['hosts']['c']['findings'] == []
    assert report['totals']['resync_not_active'] == 1


def test_a_host_with_state_absent_is_not_checked():
    report = snat_report({'a': host(managed=False, chain={})})
    assert report['hosts']['a']['chain'] == 'not managed' and report['hosts']['a']['policy'] == 'ok'


def test_sums_per_group_and_for_the_fleet():
    report = snat_report({
        'a1': host(['cluster_a', 'rack1']), 'a2': host(['cluster_a'], offenders=[DOCKER, DOCKER]),
        'b1': host(['cluster_b', 'rack1'], ch=chain(True, True, ['x'])),
    }, ['cluster_a', 'cluster_b'])
    assert sorted(report['groups']) == ['cluster_a', 'cluster_b']
    assert report['groups']['cluster_a'] == dict(hosts=2, off_policy=1, chain_missing=0, chain_drifted=0,
                                                 foreign_snat=1, offenders=2, resync_not_active=0, unreadable=0)
    assert report['groups']['cluster_b']['chain_drifted'] == 1
    assert report['totals']['hosts'] == 3 and report['totals']['off_policy'] == 2
    # Without a list, every group of every host.
    assert sorted(snat_report({'a1': host(['cluster_a', 'rack1'])})['groups']) == ['cluster_a', 'rack1']


@pytest.mark.parametrize('value,groups', [(['a'], []), ({'a': host()}, 'cluster_a'), ({'a': host()}, [1])])
def test_bad_input_is_an_error_that_says_what_it_wanted(value, groups):
    with pytest.raises(AnsibleFilterError, match='ipmasq.agent.snat_report'):
        snat_report(value, groups)
