"""The fleet form's controller side (playbooks/explain.yml): the flow
checked before any host is touched (ipmasq.agent.snat_flow), and the hosts'
answers summed up (ipmasq.agent.snat_explain_summary)."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.filter.snat_explain_summary import snat_explain_summary
from ansible_collections.ipmasq.agent.plugins.filter.snat_flow import snat_flow


def answer(verdict, owner=None, chain=None, position=None, to=None, backend='iptables-nft', table='nat', **more):
    decided = None if owner is None else {'owner': owner, 'backend': backend, 'table': table, 'chain': chain,
                                          'rule': '-A %s ...' % chain, 'position': position}
    out = {'changed': False, 'verdict': verdict, 'to': to, 'decided_by': decided,
           'msg': '10.244.1.2 → 203.0.113.10: %s' % verdict}
    out.update(more)
    return out


def test_the_flow_is_checked_and_given_as_the_module_arguments():
    assert snat_flow({'src': ' 10.244.1.2 ', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': 443,
                      'out_interface': '', 'mark': None}) == {
        'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': '443'}


@pytest.mark.parametrize('flow,words', [
    ({'src': '10.244.1.2/24', 'dst': '203.0.113.10'}, "src: '10.244.1.2/24' is not an IPv4 or IPv6 address"),
    ({'src': '10.244.1.2', 'dst': 'example.com'}, "dst: 'example.com' is not an IPv4 or IPv6 address"),
    ({'src': '10.244.1.2', 'dst': '2001:db8::1'}, 'src 10.244.1.2 and dst 2001:db8::1 are not of one IP family'),
    ({'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'tcpp'}, "proto: 'tcpp' is not a protocol"),
    ({'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'icmp', 'dport': '80'}, "dport: '80' needs proto"),
    ({'src': '10.244.1.2', 'dst': '203.0.113.10', 'mark': '0x1ffffffff'}, "mark: '0x1ffffffff' is not a packet mark"),
    ({'src': '10.244.1.2', 'dst': '203.0.113.10', 'out_interface': 'eth*'}, "out_interface: 'eth*' is not"),
    ({'dst': '203.0.113.10'}, "src: give the flow's source address"),
    ({'src': '10.244.1.2', 'dst': '203.0.113.10', 'sport': '80'}, 'sport is not a key of a flow'),
])
def test_a_bad_flow_names_the_value(flow, words):
    with pytest.raises(AnsibleFilterError) as info:
        snat_flow(flow)
    assert str(info.value).startswith('ipmasq.agent.snat_flow: ') and words in str(info.value), str(info.value)


def test_hosts_are_summed_up_with_their_deciding_rule_and_the_groups_that_disagree():
    results = {
        'east-1': answer('unchanged'),
        'east-2': answer('masquerade', 'ip-masq-agent', 'IP-MASQ-AGENT', 4),
        'west-1': answer('masquerade', 'docker', 'POSTROUTING', 1),
        'west-2': answer('masquerade', 'cni', 'CNI-abc', 2),
        'north-1': answer('snat', 'ip-masq-agent', 'postrouting', 5, to='203.0.113.7', backend='nft',
                          table='inet ip-masq-agent'),
        'north-2': answer('snat', 'ip-masq-agent', 'postrouting', 5, to='203.0.113.8', backend='nft',
                          table='inet ip-masq-agent'),
        'south-1': {'failed': True, 'msg': 'boom'},
        'south-2': {'unreachable': True, 'msg': 'ssh: connect refused'},
        'south-3': answer('unknown', 'unknown', 'post', 2, reason='cannot evaluate ct state new'),
    }
    groups = dict((name, ['ip_masq_nodes', 'cluster_' + name.split('-')[0]]) for name in results)
    out = snat_explain_summary(results, host_groups=groups)
    assert out['translated_hosts'] == ['east-2', 'north-1', 'north-2', 'west-1', 'west-2']
    assert out['unchanged_hosts'] == ['east-1']
    assert out['unknown_hosts'] == ['south-3']
    assert out['failed_hosts'] == ['south-1', 'south-2']
    assert out['hosts']['west-1']['decided_by'] == 'docker (iptables-nft nat chain POSTROUTING rule 1)'
    assert out['hosts']['west-1']['rule'] == '-A POSTROUTING ...'
    assert out['hosts']['east-1']['decided_by'] is None
    assert out['hosts']['south-1']['verdict'] == 'failed' and out['hosts']['south-2']['verdict'] == 'unreachable'
    assert out['deciders']['cni (iptables-nft nat chain CNI-abc rule 2)'] == ['west-2']
    assert out['deciders']['ip-masq-agent (nft inet ip-masq-agent chain postrouting rule 5)'] == ['north-1', 'north-2']
    # east: unchanged and masquerade; north: two SNAT addresses; west: two owners, one verdict (agrees).
    assert sorted(out['disagreeing_groups']) == ['cluster_east', 'cluster_north', 'cluster_south']
    assert out['disagreeing_groups']['cluster_east'] == {'unchanged': ['east-1'], 'masquerade': ['east-2']}
    assert out['disagreeing_groups']['cluster_north'] == {'snat to 203.0.113.7': ['north-1'],
                                                          'snat to 203.0.113.8': ['north-2']}
    assert 'ip_masq_nodes' not in out['groups'] and out['groups']['cluster_west'] == {
        'masquerade': ['west-1', 'west-2']}
    assert 'group cluster_east disagrees: masquerade on east-2; unchanged on east-1' in out['lines']
    assert 'leave its source unchanged: east-1' in out['lines']


def test_after_mode_keeps_the_answer_now_beside_and_agreement_is_said():
    now = answer('unchanged')
    results = {'a': answer('masquerade', 'ip-masq-agent', 'IP-MASQ-AGENT', 4, after=True,
                           now=dict((k, now[k]) for k in ('verdict', 'to', 'decided_by', 'msg')))}
    out = snat_explain_summary(results, host_groups={'a': ['g']})
    assert out['hosts']['a']['now']['verdict'] == 'unchanged'
    assert out['lines'][-1] == 'every group agrees within itself'
    assert any(line.startswith('a: ') and '(now: ' in line for line in out['lines'])
    assert snat_explain_summary({'a': {}})['hosts']['a']['verdict'] == 'no answer'


def test_bad_input_is_named():
    with pytest.raises(AnsibleFilterError, match='give a dict of host name'):
        snat_explain_summary(['a'])
    with pytest.raises(AnsibleFilterError, match='host_groups must be a dict'):
        snat_explain_summary({}, host_groups=['a'])
