"""The fleet report's classification (ipmasq.agent.snat_report): pure logic on
the module results playbooks/audit.yml collects; the playbook itself runs
against a real fleet in tests/integration/test_fleet_ssh.py."""
import base64

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.filter.snat_report import snat_report

OURS = {'owner': 'ip-masq-agent', 'family': 'ipv4', 'backend': 'iptables-nft', 'table': 'nat', 'chain': 'IP-MASQ-AGENT',
        'rule': '-A ...', 'reachable': True, 'allowed': True, 'allowed_by': 'ours', 'ours': True}
OURS_NFT = {'owner': 'ip-masq-agent', 'family': 'inet', 'backend': 'nft', 'table': 'inet ip-masq-agent',
            'chain': 'postrouting', 'rule': 'masquerade', 'reachable': True, 'allowed': True, 'allowed_by': 'ours',
            'ours': True}
DOCKER = {'owner': 'docker', 'family': 'ipv4', 'table': 'nat', 'chain': 'POSTROUTING', 'path': ['POSTROUTING'],
          'rule': '-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE', 'reachable': True, 'allowed': False,
          'hint': 'set "ip-masq": false'}


def chain(changed=False, exists=True, actions=()):
    return {'changed': changed, 'actions': list(actions), 'backend': 'nf_tables', 'iptables_version': '1.8.9',
            'ipv4': {'managed': True, 'before': {'chain_exists': exists}}, 'ipv6': {'managed': False}}


def host(groups=('cluster_a',), ch=None, offenders=(), **extra):
    found = {'groups': list(groups), 'managed': True, 'chain': ch or chain(),
             'snat': {'only_ours': not offenders, 'sources': [OURS] + list(offenders), 'offenders': list(offenders),
                      'ours_backends': ['iptables'], 'ours_in': ['iptables-nft']},
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
    assert ch['actions'][0] in found['findings'][0]['what'] and 'ansible-playbook -i INVENTORY ipmasq.agent.site --limit a' in found['findings'][0]['do']


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


def test_a_host_with_state_absent_is_not_checked_but_ours_left_there_is_named():
    report = snat_report({'a': host(managed=False, chain={}, snat={'sources': [DOCKER], 'offenders': [DOCKER]}),
                          'b': host(managed=False, chain={})})
    assert report['hosts']['a']['chain'] == 'not managed' and report['hosts']['a']['policy'] == 'ok'
    (finding,) = report['hosts']['b']['findings']
    assert report['off_policy_hosts'] == ['b']
    assert finding['what'] == 'ip_masq_state is absent, but our policy still acts on traffic (iptables-nft)'
    assert 'ansible-playbook -i INVENTORY ipmasq.agent.site --limit b' in finding['do']


def test_sums_per_group_and_for_the_fleet():
    report = snat_report({
        'a1': host(['cluster_a', 'rack1']), 'a2': host(['cluster_a'], offenders=[DOCKER, DOCKER]),
        'b1': host(['cluster_b', 'rack1'], ch=chain(True, True, ['x'])),
    }, ['cluster_a', 'cluster_b'])
    assert sorted(report['groups']) == ['cluster_a', 'cluster_b']
    assert report['groups']['cluster_a'] == dict(hosts=2, off_policy=1, chain_missing=0, chain_drifted=0,
                                                 foreign_snat=1, offenders=2, resync_not_active=0, unreadable=0,
                                                 unreachable=0, in_both_backends=0)
    assert report['groups']['cluster_b']['chain_drifted'] == 1
    assert report['totals']['hosts'] == 3 and report['totals']['off_policy'] == 2
    # Without a list, every group of every host.
    assert sorted(snat_report({'a1': host(['cluster_a', 'rack1'])})['groups']) == ['cluster_a', 'rack1']


@pytest.mark.parametrize('value,groups,extra', [
    (['a'], [], {}), ({'a': host()}, 'cluster_a', {}), ({'a': host()}, [1], {}),
    ({'a': host()}, [], {'host_groups': {'a': 'cluster_a'}}), ({'a': host()}, [], {'host_groups': ['a']}),
    ({'a': host()}, [], {'unreachable': ['a']}), ({'a': host()}, [], {'on_unreachable': 'skip'}),
    ({'a': host()}, [], {'fail_off_policy': 'ture'}), ({'a': host()}, [], {'fail_off_policy': None}),
    ({'a': host(settings=['ip_masq_state'])}, [], {}),
    ({'a': host(settings={'ip_masq_resync_enabled': 'ture'})}, [], {}),
])
def test_bad_input_is_an_error_that_says_what_it_wanted(value, groups, extra):
    with pytest.raises(AnsibleFilterError, match='ipmasq.agent.snat_report: .*, not '):
        snat_report(value, groups, **extra)


def nft_chain(changed=False, exists=True, actions=(), drift=None):
    """masq_chain's result on a node whose policy is in nftables and whose iptables was not read."""
    return {'changed': changed, 'actions': list(actions), 'backend': None, 'iptables_version': None,
            'selected_backend': 'nftables', 'nft_version': '1.0.6',
            'ipv4': {'managed': False, 'present': False, 'changed': False},
            'ipv6': {'managed': False, 'present': False, 'changed': False},
            'nftables': {'managed': True, 'exists_before': exists, 'changed': changed, 'drift': drift}}


def test_a_policy_in_nftables_says_so():
    report = snat_report({'a': host(ch=nft_chain(), snat={'only_ours': True, 'ours_backends': ['nftables'],
                                                          'ours_in': ['nftables'], 'sources': [OURS_NFT],
                                                          'offenders': []})})
    found = report['hosts']['a']
    assert found['policy'] == 'ok' and found['chain'] == 'in place'
    assert found['policy_backend'] == 'nftables' and found['policy_in'] == ['nftables'] and found['nft'] == '1.0.6'
    assert found['ours_backends'] == ['nftables'] and found['only_ours'] is True
    # Missing is missing on nftables too (no family of iptables is managed there).
    missing = snat_report({'a': host(ch=nft_chain(True, False, ['nftables: create table inet ip-masq-agent']))})
    assert missing['hosts']['a']['chain'] == 'missing'


def test_ours_in_both_backends_is_off_policy_with_what_to_do():
    snat = {'only_ours': False, 'ours_backends': ['iptables', 'nftables'], 'ours_in': ['iptables-nft', 'nftables'],
            'sources': [OURS, OURS_NFT], 'offenders': [], 'chain': 'IP-MASQ-AGENT'}
    report = snat_report({'a': host(ch=nft_chain(), snat=snat)}, ['cluster_a'])
    found = report['hosts']['a']
    (finding,) = found['findings']
    assert report['off_policy_hosts'] == ['a'] and found['policy'] == 'off-policy'
    assert found['ours_backends'] == ['iptables', 'nftables'] and found['only_ours'] is False
    assert found['policy_in'] == ['iptables-nft', 'nftables']
    assert finding['severity'] == 'off-policy'
    assert finding['what'] == ('our policy is in both iptables and nftables (iptables-nft, nftables): '
                               'the node runs two policies')
    assert 'ansible-playbook -i INVENTORY ipmasq.agent.site --limit a with ip_masq_backend' in finding['do']
    assert 'The settings put it in nftables.' in finding['do']
    assert finding['do'].endswith(
        'Or remove the other by hand: iptables -t nat -D POSTROUTING -j IP-MASQ-AGENT; iptables -t nat -F IP-MASQ-AGENT; '
        'iptables -t nat -X IP-MASQ-AGENT (iptables-legacy for a legacy table, ip6tables for IPv6), '
        'or nft delete table inet ip-masq-agent.')
    assert report['groups']['cluster_a']['in_both_backends'] == 1 and report['totals']['in_both_backends'] == 1


def test_an_unreachable_host_counts_in_its_inventory_groups():
    # The unreachable host never set its fact: its groups come from the inventory.
    lost = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: Connection refused'}
    report = snat_report({'a1': host(['cluster_a']), 'a2': {}, 'b1': host(['cluster_b'])}, [],
                         host_groups={'a1': ['cluster_a'], 'a2': ['cluster_a', 'rack1'], 'b1': ['cluster_b']},
                         unreachable={'a2': lost})
    assert report['hosts']['a2']['groups'] == ['cluster_a', 'rack1']
    assert report['groups']['cluster_a']['hosts'] == 2 and report['groups']['cluster_a']['unreachable'] == 1
    assert report['groups']['rack1']['hosts'] == 1
    assert report['totals']['hosts'] == 3
    assert sum(c['hosts'] for name, c in report['groups'].items() if name.startswith('cluster_')) == 3
    # A host named only by the unreachable results is in the report too.
    report = snat_report({'a1': host()}, host_groups={'a1': ['cluster_a'], 'a2': ['cluster_a']},
                         unreachable={'a2': lost})
    assert report['groups']['cluster_a']['hosts'] == 2 and report['unreachable_hosts'] == ['a2']


@pytest.mark.parametrize('on_unreachable,severity,off_policy', [('fail', 'off-policy', ['a2']), ('ignore', 'warning', [])])
def test_an_unreachable_host_fails_the_gate_or_not_as_asked(on_unreachable, severity, off_policy):
    lost = {'unreachable': True, 'msg': 'Connection timed out'}
    report = snat_report({'a1': host(), 'a2': {}}, unreachable={'a2': lost}, on_unreachable=on_unreachable,
                         fail_off_policy=True)
    found = report['hosts']['a2']
    (finding,) = found['findings']
    assert found['policy'] == 'unreachable' and found['unreachable'] == 'Connection timed out'
    assert finding['severity'] == severity and finding['what'] == 'could not be reached: Connection timed out'
    assert 'ip_masq_report_unreachable=%s' % on_unreachable in finding['do']
    assert report['off_policy_hosts'] == off_policy and report['unreachable_hosts'] == ['a2']
    assert report['totals']['unreachable'] == 1 and report['totals']['off_policy'] == len(off_policy)
    assert report['gate'] == {'off_policy': 'fail', 'unreachable': on_unreachable}
    # A host that went away after it answered (its fact says so) is unreachable too.
    report = snat_report({'a': host(unreachable='ssh: connection reset'), 'b': host()}, on_unreachable=on_unreachable)
    assert report['unreachable_hosts'] == ['a']
    assert report['off_policy_hosts'] == (['a'] if on_unreachable == 'fail' else [])
    assert 'no_host_answered' not in report['gate']


@pytest.mark.parametrize('on_unreachable', ['fail', 'ignore'])
def test_no_host_answering_fails_the_gate_whatever_it_says_of_unreachable_hosts(on_unreachable):
    """Issue 32 item 7: a report with no host's state says so, and every
    unreachable host is off-policy (the playbook fails it), ignore or not."""
    lost = {'unreachable': True, 'msg': 'Connection reset'}
    report = snat_report({'a1': {}, 'a2': host(unreachable='gone')}, unreachable={'a1': lost},
                         on_unreachable=on_unreachable, fail_off_policy=True)
    assert report['gate'] == {'off_policy': 'fail', 'unreachable': on_unreachable, 'no_host_answered': True}
    assert report['unreachable_hosts'] == ['a1', 'a2'] and report['off_policy_hosts'] == ['a1', 'a2']
    assert report['totals']['off_policy'] == 2 and report['totals']['unreachable'] == 2
    for name in ('a1', 'a2'):
        (finding,) = report['hosts'][name]['findings']
        assert finding['severity'] == 'off-policy'
        assert 'fails the gate (ansible-playbook exits 4)' in finding['do']
        assert ('no host answered' in finding['do']) == (on_unreachable == 'ignore')
    # One host that answered is enough for ignore to hold.
    report = snat_report({'a1': {}, 'b': host()}, unreachable={'a1': lost}, on_unreachable=on_unreachable)
    assert 'no_host_answered' not in report['gate']
    assert report['off_policy_hosts'] == (['a1'] if on_unreachable == 'fail' else [])


def test_no_host_read_or_none_at_all_is_no_answer_too():
    # Every host's task failed (none unreachable), or no host: no state, the same.
    report = snat_report({'a1': {}, 'a2': {'error': 'bad settings'}})
    assert report['gate']['no_host_answered'] is True and report['off_policy_hosts'] == ['a1', 'a2']
    assert snat_report({})['gate'] == {'off_policy': 'report', 'unreachable': 'fail', 'no_host_answered': True}
    # A host with ip_masq_state absent answered.
    assert 'no_host_answered' not in snat_report({'a': host(managed=False)})['gate']


def test_a_drift_finding_names_the_rules_missing_and_extra():
    kept = '-A IP-MASQ-AGENT -d 10.30.0.0/16 -m comment --comment "ip-masq-agent: ..." -j RETURN'
    foreign = '-A IP-MASQ-AGENT -d 198.51.100.0/24 -j RETURN'
    ch = chain(True, True, ['IPv4: rewrite chain IP-MASQ-AGENT (3 rules -> 3 rules)'])
    ch['ipv4']['drift'] = {'missing': [kept], 'extra': [foreign], 'reordered': False}
    nft = nft_chain(True, True, ['nftables: rewrite table inet ip-masq-agent (...)'],
                    drift={'rules': {'missing': [], 'extra': ['ip daddr 203.0.113.0/24 masquerade'], 'reordered': False},
                           'sets': {'nonmasq4': {'missing': ['10.%d.0.0/16' % i for i in range(7)], 'extra': []}}})
    report = snat_report({'a': host(ch=ch), 'b': host(ch=nft)})
    (what_a,) = [f['what'] for f in report['hosts']['a']['findings']]
    assert what_a.startswith('our chain has drifted; a run would: IPv4: rewrite chain IP-MASQ-AGENT (3 rules -> 3 rules)')
    assert 'IPv4 chain: missing `%s`, extra `%s`' % (kept, foreign) in what_a
    assert report['hosts']['a']['chain_drift'] == {'ipv4': ch['ipv4']['drift']}
    (what_b,) = [f['what'] for f in report['hosts']['b']['findings']]
    assert 'nftables chain postrouting: extra `ip daddr 203.0.113.0/24 masquerade`' in what_b
    assert 'nftables set nonmasq4: missing `10.0.0.0/16`, ' in what_b and '(and 2 more)' in what_b
    assert report['hosts']['b']['chain_drift']['nftables']['sets']['nonmasq4']['missing'][-1] == '10.6.0.0/16'


def test_ours_in_both_iptables_flavours_is_off_policy_too():
    legacy = dict(OURS, backend='iptables-legacy')
    snat = {'only_ours': False, 'ours_backends': ['iptables'], 'ours_in': ['iptables-legacy', 'iptables-nft'],
            'sources': [OURS, legacy], 'offenders': [], 'chain': 'IP-MASQ-AGENT'}
    report = snat_report({'a': host(snat=snat)}, ['cluster_a'])
    found = report['hosts']['a']
    (finding,) = found['findings']
    assert report['off_policy_hosts'] == ['a'] and found['policy_in'] == ['iptables-legacy', 'iptables-nft']
    assert finding['what'] == ('our policy is in both the iptables-legacy and the iptables-nft nat table '
                               '(iptables-legacy, iptables-nft): the node runs two policies')
    assert 'iptables-legacy for a legacy table' in finding['do']
    assert report['totals']['in_both_backends'] == 1


# What audit.yml registers on a host, as it registers it: the role's typed settings (the ip_masq action's
# settings), the slurp of the kernel release and the systemctl is-active result; the filter judges them.
def settings(**extra):
    out = {'ip_masq_state': 'present', 'ip_masq_resync_enabled': True, 'ip_masq_resync_systemctl': True}
    out.update(extra)
    return out


def registered(timer=None, **extra):
    found = {'settings': settings(**extra), 'chain': chain(),
             'snat': {'only_ours': True, 'sources': [OURS], 'offenders': []},
             'kernel': {'content': base64.b64encode(b'6.1.0-13-amd64\n').decode(), 'source': '/proc/sys/kernel/osrelease'},
             'timer': timer if timer is not None else {'skipped': True}}
    return found


def is_active(said, rc):
    return {'changed': False, 'rc': rc, 'stdout': said + '\n', 'stderr': ''}


@pytest.mark.parametrize('value', [True, 't', 'T', 'yes', 'on', 'y', '1', 1])
def test_resync_enabled_is_read_as_the_role_reads_a_boolean(value):
    """'t' | bool is false in Jinja, while the role's spec takes t as true: the report reads it as the role does."""
    report = snat_report({'a': registered(is_active('inactive', 3), ip_masq_resync_enabled=value)})
    assert report['hosts']['a']['resync'] == 'inactive'
    assert [f['what'] for f in report['hosts']['a']['findings']] == ['the resync timer is inactive']
    assert report['totals']['resync_not_active'] == 1


@pytest.mark.parametrize('value', [False, 'f', 'no', 'off', 'n', '0', 0])
def test_resync_disabled_is_off_whatever_the_timer_says(value):
    report = snat_report({'a': registered(is_active('inactive', 3), ip_masq_resync_enabled=value)})
    assert report['hosts']['a']['resync'] == 'off' and report['hosts']['a']['findings'] == []


@pytest.mark.parametrize('timer,systemctl,state,want', [
    (is_active('active', 0), True, 'present', 'active'),
    (is_active('activating', 3), True, 'present', 'activating'),
    (is_active('failed', 3), True, 'present', 'failed'),
    (is_active('inactive', 4), True, 'present', 'inactive'),
    (is_active('', 4), True, 'present', 'not installed'),
    (is_active('what', 1), True, 'present', 'unknown'),
    ({'skipped': True}, 'f', 'present', 'not checked'),
    ({'skipped': True}, True, 'absent', 'off'),
])
def test_the_resync_state_comes_from_systemctl_and_the_settings(timer, systemctl, state, want):
    report = snat_report({'a': registered(timer, ip_masq_resync_systemctl=systemctl, ip_masq_state=state)})
    assert report['hosts']['a']['resync'] == want
    assert report['hosts']['a']['chain'] == ('not managed' if state == 'absent' else 'in place')
    assert report['hosts']['a']['kernel'] == '6.1.0-13-amd64'


def test_a_host_lost_after_the_listing_is_unreachable_with_the_first_message():
    found = registered()
    found['kernel'] = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: reset', 'changed': False}
    found['timer'] = {'unreachable': True, 'msg': 'later', 'changed': False}
    report = snat_report({'a': found, 'b': registered()})
    assert report['unreachable_hosts'] == ['a'] and report['off_policy_hosts'] == ['a']
    assert report['hosts']['a']['unreachable'] == 'Failed to connect to the host via ssh: reset'
    assert report['hosts']['a']['kernel'] == ''


def test_a_bad_setting_is_an_error_that_names_the_host_and_the_variable():
    with pytest.raises(AnsibleFilterError, match="host east-1: ip_masq_resync_systemctl must be true or false, not 'sure'"):
        snat_report({'east-1': registered(is_active('active', 0), ip_masq_resync_systemctl='sure')})


@pytest.mark.parametrize('value,gate', [(True, 'fail'), ('t', 'fail'), ('yes', 'fail'), ('f', 'report'), (False, 'report')])
def test_fail_off_policy_is_read_as_the_role_reads_a_boolean(value, gate):
    assert snat_report({'a': registered()}, fail_off_policy=value)['gate']['off_policy'] == gate


def test_the_task_results_and_the_keys_they_imply_give_one_report():
    """The playbook's registered results and the keys it used to derive in Jinja are one report."""
    derived = {'chain': chain(), 'snat': {'only_ours': True, 'sources': [OURS], 'offenders': []},
               'kernel': '6.1.0-13-amd64', 'managed': True, 'resync_enabled': True, 'resync': 'failed'}
    assert snat_report({'a': registered(is_active('failed', 3))}) == snat_report({'a': derived})


def test_a_host_lost_at_the_listing_is_reported_with_nothing_else_read():
    """What the playbook registers for a host that did not answer the first task (the rest skipped) gives the
    report a host given only as unreachable gives."""
    lost = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: refused', 'changed': False}
    found = registered({'skipped': True, 'changed': False})
    found.update(snat=lost, chain={}, kernel={'skipped': True, 'changed': False})
    ok = registered(is_active('active', 0))
    via_results = snat_report({'a': found, 'b': ok}, host_groups={'a': ['g'], 'b': ['g']})
    via_mapping = snat_report({'a': {}, 'b': ok}, host_groups={'a': ['g'], 'b': ['g']}, unreachable={'a': lost})
    assert via_results == via_mapping
    assert via_results['hosts']['a']['kernel'] is None and via_results['hosts']['a']['resync'] == 'unknown'
    assert via_results['unreachable_hosts'] == ['a']
