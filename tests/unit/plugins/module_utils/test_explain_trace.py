"""Unit tests of the SNAT explanation (module_utils/_explain/ and the
backends' explain.py) on the rule sets Docker, kube-proxy and ours really
write (snat_audit_data/, the audit's real tool output) and on small hand
written ones.  The explanation against real packets is
tests/integration/test_snat_explain.py."""
import ipaddress
import json

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.trace import Flow
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import explain as ipt_explain
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.audit import nat_finding
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import parse_save
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import explain as nft_explain
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.audit import ruleset_finding
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import parse_nft
from ansible_collections.ipmasq.agent.plugins.module_utils._explain import flow as flows
from ansible_collections.ipmasq.agent.plugins.module_utils._explain.answer import explain, programs_of
from ansible_collections.ipmasq.agent.plugins.module_utils._explain.node import local_addresses

from test_snat_audit import CHAIN, HEADER_NFT, data, merge, ours_save

LOCAL = {ipaddress.ip_address(a) for a in ('10.244.1.1', '203.0.113.1', '127.0.0.1')}


def ipt(*texts, family=4, flavour='nf_tables'):
    return nat_finding('iptables', family, flavour, parse_save(merge(*texts)))


def nft(text):
    return ruleset_finding('nftables', parse_nft(text))


def ask(findings, src, dst, proto='udp', dport=30000, oif='eth0', mark=0, local=LOCAL):
    flow = Flow(src, dst, proto, dport, oif, mark, local)
    return explain(programs_of(findings, flow.family, CHAIN), flow, CHAIN)


def test_ours_masquerades_outside_the_nonmasq_ranges_and_names_the_jump():
    found = [ipt(ours_save())]
    res = ask(found, '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'masquerade'
    by = res['decided_by']
    assert (by['owner'], by['backend'], by['table'], by['chain']) == ('ip-masq-agent', 'iptables-nft', 'nat', CHAIN)
    assert res['msg'].startswith('10.244.1.2 → 203.0.113.10: MASQUERADE by ours (IP-MASQ-AGENT rule ')
    assert res['msg'].endswith('after POSTROUTING rule 1 jumped there.')
    assert [s['action'] for s in res['path']] == ['jump', 'decide']
    assert res['path'][0]['why'].startswith('every match held')


def test_ours_leaves_cluster_traffic_and_local_destinations_alone():
    found = [ipt(ours_save())]
    res = ask(found, '10.244.1.2', '10.10.0.10')
    assert res['verdict'] == 'unchanged' and res['decided_by'] is None
    assert 'leaves with its own source' in res['msg']
    assert [s['action'] for s in res['path']] == ['jump', 'return', 'end']
    # addrtype ! --dst-type LOCAL: the node's own address is not jumped to ours.
    res = ask(found, '10.244.1.2', '203.0.113.1')
    assert res['verdict'] == 'unchanged'
    assert [s['action'] for s in res['path']] == ['end']


def test_without_the_nodes_addresses_the_addrtype_match_is_unknown_and_named():
    res = ask([ipt(ours_save())], '10.244.1.2', '203.0.113.10', local=None)
    assert res['verdict'] == 'unknown'
    assert '-m addrtype ! --dst-type LOCAL' in res['reason']
    assert res['decided_by']['chain'] == 'POSTROUTING' and res['decided_by']['position'] == 1


def test_snat_to():
    res = ask([ipt(ours_save(snat_to=['203.0.113.7']))], '10.244.1.2', '198.51.100.10')
    assert (res['verdict'], res['to']) == ('snat', '203.0.113.7')
    assert 'SNAT to 203.0.113.7 by ours' in res['msg']


def test_docker_rules_by_source_and_out_interface():
    found = [ipt(data('docker.save'))]
    res = ask(found, '172.17.0.5', '203.0.113.10', oif='eth0')
    assert res['verdict'] == 'masquerade' and res['decided_by']['owner'] == 'docker'
    assert res['decided_by']['position'] == 2
    assert ask(found, '172.17.0.5', '172.17.0.9', oif='docker0')['verdict'] == 'unchanged'
    res = ask(found, '172.17.0.5', '203.0.113.10', oif=None)
    assert res['verdict'] == 'unknown' and '! -o docker0 (no out_interface given)' in res['reason']


def test_kube_proxy_masquerades_only_marked_packets_and_clears_the_mark():
    found = [ipt(data('kube_proxy.save'))]
    assert ask(found, '10.244.1.2', '203.0.113.10')['verdict'] == 'unchanged'
    res = ask(found, '10.244.1.2', '203.0.113.10', mark=0x4000)
    assert res['verdict'] == 'masquerade' and res['decided_by']['owner'] == 'kube-proxy'
    assert res['decided_by']['chain'] == 'KUBE-POSTROUTING' and res['decided_by']['position'] == 3


def test_first_chain_that_translates_wins_and_a_return_does_not_stop_the_next():
    """kube-proxy first in POSTROUTING returns unmarked packets; ours then decides."""
    found = [ipt(data('kube_proxy.save'), ours_save())]
    res = ask(found, '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'masquerade' and res['decided_by']['owner'] == 'ip-masq-agent'
    assert [s['action'] for s in res['path']][:2] == ['jump', 'return']


def test_nft_kube_proxy_table_with_mark_arithmetic():
    found = [nft(data('kube_proxy.json'))]
    assert ask(found, '10.244.1.2', '203.0.113.10')['verdict'] == 'unchanged'
    res = ask(found, '10.244.1.2', '203.0.113.10', mark=0x4000)
    assert res['verdict'] == 'masquerade'
    assert (res['decided_by']['owner'], res['decided_by']['table'], res['decided_by']['chain']) == \
        ('kube-proxy', 'ip kube-proxy', 'masquerading')


def test_nft_vmap_goto_and_priority_order():
    """inet egress (srcnat + 10) runs after a srcnat table: the earlier one decides."""
    egress = nft(data('egress_vmap.json'))
    res = ask([egress], '10.244.1.2', '203.0.113.10', oif='wan0')
    assert res['verdict'] == 'masquerade' and res['decided_by']['chain'] == 'to_wan'
    assert ask([egress], '10.244.1.2', '203.0.113.10', oif='lo')['verdict'] == 'unchanged'
    first = ipt(ours_save(snat_to=['203.0.113.7']))
    res = ask([egress, first], '10.244.1.2', '203.0.113.10', oif='wan0')
    assert (res['verdict'], res['to'], res['decided_by']['owner']) == ('snat', '203.0.113.7', 'ip-masq-agent')
    assert [c['priority'] for c in res['chains']] == [100]


@pytest.mark.parametrize('prio,want', [(100, 100), (101, 101), ('srcnat', 100), ('srcnat + 1', 101),
                                       ('srcnat - 1', 99), ('srcnat + 10', 110), ('dstnat', -100), ('filter', 0)])
def test_nft_priority_by_name_and_offset(prio, want):
    """A base chain's priority as libnftables may write it: a number, a name, or a name and an offset
    (nft lists our chain as ``priority srcnat + 1`` or ``srcnat - 1``)."""
    assert nft_explain.base_priority({'prio': prio}) == want


@pytest.mark.parametrize('prio', ['out', 'srcnat + x', 'srcnat * 2', None, True, 1.5, '100'])
def test_nft_priority_not_understood_is_an_error_naming_chain_and_value(prio):
    """A priority that is neither a number nor a known name (with an offset) cannot be put in the hook's
    order: a clean error naming the chain and the value, never a guess or a name compared with a number."""
    with pytest.raises(MasqError) as e:
        nft_explain.base_priority({'prio': prio}, 'base chain post of table ip odd')
    assert 'base chain post of table ip odd' in e.value.msg and repr(prio) in e.value.msg


def test_our_table_after_iptables_nat_decides_only_what_iptables_leaves():
    """Ours at srcnat + 1 (jump_position append) runs after iptables' POSTROUTING (100): a flow
    iptables translates is decided there, without a tie; one it leaves is ours."""
    ours = nft(json.dumps({'nftables': [
        {'table': {'family': 'inet', 'name': 'ip-masq-agent'}},
        {'chain': {'family': 'inet', 'table': 'ip-masq-agent', 'name': 'postrouting', 'type': 'nat',
                   'hook': 'postrouting', 'prio': 'srcnat + 1', 'policy': 'accept'}},
        {'rule': {'family': 'inet', 'table': 'ip-masq-agent', 'chain': 'postrouting', 'comment':
                  'ip-masq-agent: outbound traffic should be subject to MASQUERADE', 'expr': [
                      {'snat': {'family': 'ip', 'addr': '203.0.113.7'}}]}}]}))
    docker = ipt('-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE')
    res = ask([ours, docker], '172.17.0.2', '203.0.113.10')
    assert (res['verdict'], res['decided_by']['owner']) == ('masquerade', 'docker'), res
    assert [c['priority'] for c in res['chains']] == [100]
    res = ask([ours, docker], '10.244.1.2', '203.0.113.10')
    assert (res['verdict'], res['to'], res['decided_by']['table']) == ('snat', '203.0.113.7', 'inet ip-masq-agent'), res
    assert [c['priority'] for c in res['chains']] == [100, 101]


def test_equal_priority_chains_that_disagree_are_unknown():
    other = nft(json.dumps({'nftables': [
        {'table': {'family': 'ip', 'name': 'foreign'}},
        {'chain': {'family': 'ip', 'table': 'foreign', 'name': 'post', 'type': 'nat', 'hook': 'postrouting',
                   'prio': 100, 'policy': 'accept'}},
        {'rule': {'family': 'ip', 'table': 'foreign', 'chain': 'post', 'expr': [
            {'match': {'op': '==', 'left': {'payload': {'protocol': 'ip', 'field': 'saddr'}},
                       'right': {'prefix': {'addr': '10.244.0.0', 'len': 16}}}},
            {'masquerade': None}]}}]}))
    ours = ipt(ours_save(snat_to=['203.0.113.7']))
    res = ask([ours, other], '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'unknown' and 'equal priority 100' in res['reason']
    # Alike: the verdict stands, with a word that the order is not known.
    res = ask([ipt(ours_save()), other], '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'masquerade' and 'alike' in res['reason']


def test_a_match_nobody_evaluates_is_unknown_and_named():
    text = merge(HEADER_NFT + '*nat\n:POSTROUTING ACCEPT [0:0]\n'
                 '-A POSTROUTING -m statistic --mode random --probability 0.5 -j MASQUERADE\nCOMMIT\n')
    res = ask([nat_finding('iptables', 4, 'nf_tables', parse_save(text))], '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'unknown'
    assert '-m statistic --mode random' in res['reason']


def test_iptables_nft_table_is_not_read_twice():
    """ip nat shown by iptables-nft: the nft ruleset's copy is left out."""
    tables = parse_nft(json.dumps({'nftables': [
        {'table': {'family': 'ip', 'name': 'nat'}},
        {'chain': {'family': 'ip', 'table': 'nat', 'name': 'POSTROUTING', 'type': 'nat', 'hook': 'postrouting',
                   'prio': 100, 'policy': 'accept'}},
        {'rule': {'family': 'ip', 'table': 'nat', 'chain': 'POSTROUTING',
                  'expr': [{'xt': {'type': 'target', 'name': 'MASQUERADE'}}]}}]}))
    found = [ipt(ours_save()), ruleset_finding('nftables', tables)]
    res = ask(found, '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'masquerade' and len(res['chains']) == 1


def test_mark_target_arithmetic():
    text = (HEADER_NFT + '*nat\n:POSTROUTING ACCEPT [0:0]\n'
            '-A POSTROUTING -j MARK --set-xmark 0x10/0xf0\n'
            '-A POSTROUTING -m mark --mark 0x13/0xff -j SNAT --to-source 192.0.2.1\nCOMMIT\n')
    found = [nat_finding('iptables', 4, 'nf_tables', parse_save(text))]
    assert ask(found, '10.244.1.2', '203.0.113.10', mark=0x23)['to'] == '192.0.2.1'
    assert ask(found, '10.244.1.2', '203.0.113.10', mark=0x24)['verdict'] == 'unchanged'


@pytest.mark.parametrize('args, words', [
    (('10.0.0.1/8', '1.2.3.4'), "src: '10.0.0.1/8' is not an IPv4 or IPv6 address"),
    (('10.0.0.1', 'fd00::1'), 'not of one IP family'),
    (('10.0.0.1', '1.2.3.4', 'tcpx'), "proto: 'tcpx' is not a protocol"),
    (('10.0.0.1', '1.2.3.4', '300'), "proto: '300' is not a protocol"),
    (('10.0.0.1', '1.2.3.4', 'tcp', '70000'), "dport: '70000' is not a port"),
    (('10.0.0.1', '1.2.3.4', 'icmp', '80'), "dport: '80' needs proto"),
    (('10.0.0.1', '1.2.3.4', 'tcp', '80', 'eth 0'), "out_interface: 'eth 0' is not an interface name"),
    (('10.0.0.1', '1.2.3.4', 'tcp', '80', 'eth+'), "out_interface: 'eth+' is not an interface name"),
    (('10.0.0.1', '1.2.3.4', None, None, None, '0x1ffffffff'), "mark: '0x1ffffffff' is not a packet mark"),
    (('10.0.0.1', '1.2.3.4', None, None, None, 'blue'), "mark: 'blue' is not a packet mark"),
])
def test_bad_input_names_the_value(args, words):
    with pytest.raises(MasqError) as e:
        flows.parse(*args)
    assert words in e.value.msg


def test_good_input():
    f = flows.parse('10.0.0.1', '1.2.3.4', 'TCP', '443', 'eth0', '0x4000')
    assert (f.proto, f.dport, f.oif, f.mark) == (6, 443, 'eth0', 0x4000)


def test_local_addresses_from_proc():
    files = {'/proc/net/fib_trie': ('Main: +-- 0.0.0.0/0 3 0 5 |-- 10.244.1.0 /24 link UNICAST '
                                    '|-- 10.244.1.1 /32 host LOCAL Local: |-- 10.244.1.1 /32 host LOCAL').split(),
             '/proc/net/if_inet6': 'fd000244000100000000000000000001 03 40 00 80 to-pod'.split()}
    got = local_addresses(lambda p: files.get(p, []))
    assert got == {ipaddress.ip_address('10.244.1.1'), ipaddress.ip_address('fd00:244:1::1')}
    assert local_addresses(lambda p: []) is None


def test_unreadable_rule_is_unknown():
    nat = parse_save(HEADER_NFT + '*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -m comment --comment "x -j MASQUERADE\n'
                     'COMMIT\n')
    (program,) = ipt_explain.programs(nat, 4, "iptables-nft", lambda rule: None)
    flow = Flow('10.0.0.1', '1.2.3.4')
    res = explain([program], flow, CHAIN)
    assert res['verdict'] == 'unknown' and 'cannot be read' in res['reason']


def test_goto_returns_to_the_caller_of_the_chain_that_went_there():
    text = (HEADER_NFT + '*nat\n:POSTROUTING ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n'
            '-A POSTROUTING -j A\n-A POSTROUTING -j MASQUERADE\n'
            '-A A -g B\n-A A -j SNAT --to-source 192.0.2.1\n-A B -d 198.51.100.0/24 -j SNAT --to-source 192.0.2.2\n'
            'COMMIT\n')
    found = [nat_finding('iptables', 4, 'nf_tables', parse_save(text))]
    res = ask(found, '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'masquerade' and res['decided_by']['chain'] == 'POSTROUTING'
    assert [s['action'] for s in res['path']] == ['jump', 'goto', 'return', 'decide']
    assert ask(found, '10.244.1.2', '198.51.100.9')['to'] == '192.0.2.2'


def test_a_loop_is_cut_and_unknown():
    text = (HEADER_NFT + '*nat\n:POSTROUTING ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n'
            '-A POSTROUTING -j A\n-A A -g B\n-A B -g A\nCOMMIT\n')
    res = ask([nat_finding('iptables', 4, 'nf_tables', parse_save(text))], '10.244.1.2', '203.0.113.10')
    assert res['verdict'] == 'unknown' and 'a loop?' in res['reason']


def test_equal_priority_disagreement_lists_the_candidates():
    other = nft(data('egress_vmap.json').replace('"prio": 110', '"prio": 100'))
    res = ask([ipt(ours_save(snat_to=['203.0.113.7'])), other], '10.244.1.2', '203.0.113.10', oif='wan0')
    assert res['verdict'] == 'unknown' and res['decided_by'] is None
    assert sorted((c['verdict'], c['to'], c['decided_by']['owner']) for c in res['candidates']) == \
        [('masquerade', None, 'unknown'), ('snat', '203.0.113.7', 'ip-masq-agent')]


def test_ipv6_flow_reads_only_ipv6_chains():
    found = [ipt(ours_save(family=6), family=6), ipt(ours_save(snat_to=['203.0.113.7']))]
    local = {ipaddress.ip_address('fd00:244:1::1')}
    res = ask(found, 'fd00:244:1::2', '2001:db8:e::10', local=local)
    assert res['verdict'] == 'masquerade' and res['decided_by']['chain'] == CHAIN
    assert ask(found, 'fd00:244:1::2', 'fe80::10', local=local)['verdict'] == 'unchanged'   # link-local kept
    # An inet table's "ip saddr" match never holds for an IPv6 packet.
    inet = nft(json.dumps({'nftables': [
        {'table': {'family': 'inet', 'name': 'mixed'}},
        {'chain': {'family': 'inet', 'table': 'mixed', 'name': 'post', 'type': 'nat', 'hook': 'postrouting',
                   'prio': 50, 'policy': 'accept'}},
        {'rule': {'family': 'inet', 'table': 'mixed', 'chain': 'post', 'expr': [
            {'match': {'op': '!=', 'left': {'payload': {'protocol': 'ip', 'field': 'saddr'}}, 'right': '10.0.0.1'}},
            {'masquerade': None}]}}]}))
    res = ask([inet] + found, 'fd00:244:1::2', 'fe80::10', local=local)
    assert res['verdict'] == 'unchanged'
    assert ask([inet], '10.244.1.2', '203.0.113.10')['decided_by']['table'] == 'inet mixed'
