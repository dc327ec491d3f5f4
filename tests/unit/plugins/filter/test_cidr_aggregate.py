"""ipmasq.agent.cidr_aggregate and ipmasq.agent.cidr_aggregate_report."""
import ipaddress

import netaddr
import pytest
from hypothesis import given, settings, strategies as st

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter import cidr_aggregate as agg_plugin
from ansible_collections.ipmasq.agent.plugins.filter import cidr_aggregate_report as report_plugin
from ansible_collections.ipmasq.agent.plugins.filter.cidr_aggregate import cidr_aggregate
from ansible_collections.ipmasq.agent.plugins.filter.cidr_aggregate_report import cidr_aggregate_report


def test_filter_modules_expose_the_filters():
    assert agg_plugin.FilterModule().filters() == {'cidr_aggregate': cidr_aggregate}
    assert report_plugin.FilterModule().filters() == {'cidr_aggregate_report': cidr_aggregate_report}


@pytest.mark.parametrize('given_list,expected', [
    ([], []),
    (['10.0.0.0/8'], ['10.0.0.0/8']),
    (['10.0.0.0/8', '10.0.0.0/8'], ['10.0.0.0/8']),                       # duplicate
    (['10.1.0.0/16', '10.0.0.0/8'], ['10.0.0.0/8']),                      # contained
    (['10.0.0.0/9', '10.128.0.0/9'], ['10.0.0.0/8']),                     # adjacent siblings
    (['10.0.1.0/24', '10.0.2.0/24'], ['10.0.1.0/24', '10.0.2.0/24']),      # adjacent, no single CIDR
    (['10.0.0.0/24', '10.0.1.0/24', '10.0.2.0/24', '10.0.3.0/25', '10.0.3.128/25'], ['10.0.0.0/22']),
    (['0.0.0.0/1', '128.0.0.0/1'], ['0.0.0.0/0']),
    (['192.168.0.0/16', '10.0.0.0/8', '172.16.0.0/12'], ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']),
    (['fd00::/9', '10.0.0.0/8', 'fd80::/9'], ['10.0.0.0/8', 'fd00::/8']),  # IPv4 first, then IPv6
    (['::/1', '8000::/1', '0.0.0.0/0'], ['0.0.0.0/0', '::/0']),
    (['::ffff:0.0.0.0/96', '0.0.0.0/0'], ['0.0.0.0/0', '::ffff:0.0.0.0/96']),  # families never mix
    (['255.255.255.255/32', '255.255.255.254/32'], ['255.255.255.254/31']),
])
def test_aggregate(given_list, expected):
    assert cidr_aggregate(given_list) == expected


def test_aggregate_validates_like_cidr_list():
    with pytest.raises(AnsibleFilterError) as info:
        cidr_aggregate(['10.0.0.0/8', '10.0.0.1/8', 'banana', '10.1.1.1'], label='nonmasq')
    message = str(info.value)
    assert message.startswith('ipmasq.agent.cidr_aggregate: 3 problems in nonmasq (4 entries): ')
    assert "[1] '10.0.0.1/8': host bits set: the aligned network is 10.0.0.0/8" in message
    assert "[2] 'banana': not an IP address or CIDR" in message
    assert "[3] '10.1.1.1': a bare address" in message


def test_aggregate_refuses_a_string():
    with pytest.raises(AnsibleFilterError, match='ipmasq.agent.cidr_aggregate: the input must be a list'):
        cidr_aggregate('10.0.0.0/8')


def test_report_explains_every_kind_of_merge():
    report = cidr_aggregate_report([
        '10.0.0.0/9', '10.128.0.0/9', '10.1.0.0/16', '10.1.0.0/16', '10.1.2.0/24',
        '192.168.0.0/16', 'fd00::/8', 'FD00::/8'])
    assert report['cidrs'] == ['10.0.0.0/8', '192.168.0.0/16', 'fd00::/8']
    assert report['input_count'] == 8
    assert report['output_count'] == 3
    assert report['merged'] == [
        {
            'into': '10.0.0.0/8',
            'from': ['10.0.0.0/9', '10.128.0.0/9', '10.1.0.0/16', '10.1.0.0/16', '10.1.2.0/24'],
            'joined': ['10.0.0.0/9', '10.128.0.0/9'],
            'contained': [{'cidr': '10.1.0.0/16', 'in': '10.0.0.0/9'},
                          {'cidr': '10.1.2.0/24', 'in': '10.0.0.0/9'}],
            'duplicates': ['10.1.0.0/16'],
            'reason': ('10.0.0.0/9 and 10.128.0.0/9 are adjacent and together make 10.0.0.0/8; '
                       '10.1.0.0/16 is inside 10.0.0.0/9; 10.1.2.0/24 is inside 10.0.0.0/9; '
                       '10.1.0.0/16 listed more than once'),
        },
        {
            'into': 'fd00::/8',
            'from': ['fd00::/8', 'fd00::/8'],
            'joined': [],
            'contained': [],
            'duplicates': ['fd00::/8'],
            'reason': 'fd00::/8 listed more than once',
        },
    ]
    assert report['summary'] == ('8 entries became 3: 2 duplicates dropped, 2 entries inside other entries, '
                                 '2 adjacent entries joined into 1 block')


def test_report_names_the_outermost_container():
    report = cidr_aggregate_report(['10.1.2.0/24', '10.0.0.0/8', '10.1.0.0/16'])
    assert report['merged'][0]['contained'] == [{'cidr': '10.1.2.0/24', 'in': '10.0.0.0/8'},
                                                {'cidr': '10.1.0.0/16', 'in': '10.0.0.0/8'}]
    assert report['merged'][0]['joined'] == []


def test_report_adjacent_but_not_joinable_is_not_a_merge():
    report = cidr_aggregate_report(['10.0.1.0/24', '10.0.2.0/24'])
    assert report['merged'] == []
    assert report['summary'] == '2 entries, nothing to merge'


def test_report_of_forty_entries_that_become_twelve():
    # 12 separate /16 blocks (10.0, 10.2, ... 10.22: never adjacent). Four are given as the
    # /16, its two /17 halves and a /24 inside; four as two /17 halves and a /24 inside;
    # four as the /16 three times.
    blocks = [f'10.{2 * i}' for i in range(12)]
    entries = []
    for b in blocks[:4]:
        entries += [f'{b}.0.0/17', f'{b}.128.0/17', f'{b}.5.0/24', f'{b}.0.0/16']
    for b in blocks[4:8]:
        entries += [f'{b}.0.0/17', f'{b}.128.0/17', f'{b}.5.0/24']
    for b in blocks[8:]:
        entries += [f'{b}.0.0/16', f'{b}.0.0/16', f'{b}.0.0/16']
    assert len(entries) == 40
    report = cidr_aggregate_report(entries)
    assert report['cidrs'] == [f'{b}.0.0/16' for b in blocks]
    assert report['input_count'] == 40 and report['output_count'] == 12
    assert report['summary'] == ('40 entries became 12: 8 duplicates dropped, 16 entries inside other '
                                 'entries, 8 adjacent entries joined into 4 blocks')
    assert len(report['merged']) == 12
    assert report['merged'][4] == {
        'into': '10.8.0.0/16', 'from': ['10.8.0.0/17', '10.8.128.0/17', '10.8.5.0/24'],
        'joined': ['10.8.0.0/17', '10.8.128.0/17'],
        'contained': [{'cidr': '10.8.5.0/24', 'in': '10.8.0.0/17'}], 'duplicates': [],
        'reason': ('10.8.0.0/17 and 10.8.128.0/17 are adjacent and together make 10.8.0.0/16; '
                   '10.8.5.0/24 is inside 10.8.0.0/17'),
    }


def test_report_lists_long_sentences_shortly():
    entries = [f'10.0.{i}.0/24' for i in range(256)]
    report = cidr_aggregate_report(entries)
    assert report['cidrs'] == ['10.0.0.0/16']
    assert len(report['merged'][0]['joined']) == 256
    assert '10.0.6.0/24 and 249 more are adjacent and together make 10.0.0.0/16' in report['merged'][0]['reason']


# ---------------------------------------------------------------- properties

def _cidr_in(version, base, base_len, min_len):
    bits = 32 if version == 4 else 128

    def build(args):
        plen, offset = args
        first = base + ((offset % (1 << (bits - base_len))) & ~((1 << (bits - plen)) - 1))
        net = ipaddress.ip_network((first, plen)) if version == 4 else ipaddress.IPv6Network((first, plen))
        return str(net)

    return st.tuples(st.integers(min_len, bits), st.integers(0, 2 ** bits - 1)).map(build)


# Clustered in small ranges, so that duplicates, containment and adjacency are frequent.
SMALL_V4 = _cidr_in(4, int(ipaddress.ip_address('10.0.0.0')), 24, 24)
WIDE_V4 = _cidr_in(4, 0, 0, 0)
SMALL_V6 = _cidr_in(6, int(ipaddress.ip_address('2001:db8::')), 120, 120)
WIDE_V6 = _cidr_in(6, 0, 0, 0)
MIXED = st.lists(st.one_of(SMALL_V4, WIDE_V4, SMALL_V6, WIDE_V6), max_size=40)


def _addresses(cidrs):
    """Every address of a list of small IPv4 CIDRs, by brute force."""
    found = set()
    for text in cidrs:
        net = ipaddress.ip_network(text)
        found.update(int(a) for a in (net if net.num_addresses > 1 else [net.network_address]))
    return found


@settings(max_examples=300, deadline=None)
@given(st.lists(SMALL_V4, max_size=40))
def test_aggregate_covers_exactly_the_same_addresses_brute_force(cidrs):
    out = cidr_aggregate(cidrs)
    assert _addresses(out) == _addresses(cidrs)


@settings(max_examples=300, deadline=None)
@given(MIXED)
def test_aggregate_is_the_same_set_minimal_sorted_and_idempotent(cidrs):
    out = cidr_aggregate(cidrs)
    assert netaddr.IPSet(out) == netaddr.IPSet(cidrs)
    # minimal: the decomposition into the fewest CIDRs is unique, netaddr finds it too
    assert out == [str(n) for n in netaddr.cidr_merge(cidrs)]
    nets = [ipaddress.ip_network(t) for t in out]
    assert nets == sorted(nets, key=lambda n: (n.version, n))
    for a, b in zip(nets, nets[1:]):
        assert a.version != b.version or not a.overlaps(b)
    assert cidr_aggregate(out) == out


@settings(max_examples=300, deadline=None)
@given(MIXED)
def test_report_accounts_for_every_entry(cidrs):
    report = cidr_aggregate_report(cidrs)
    assert report['cidrs'] == cidr_aggregate(cidrs)
    assert report['input_count'] == len(cidrs)
    assert report['output_count'] == len(report['cidrs'])
    merged_inputs = sum(len(m['from']) for m in report['merged'])
    alone = report['output_count'] - len(report['merged'])
    assert merged_inputs + alone == len(cidrs)
    networks = [ipaddress.ip_network(c) for c in cidrs]
    for merge in report['merged']:
        into = netaddr.IPNetwork(merge['into'])
        assert merge['into'] in report['cidrs']
        assert len(merge['from']) >= 2
        assert all(netaddr.IPNetwork(c) in into for c in merge['from'])
        inside = [n for n in networks if n.version == into.version and n.subnet_of(ipaddress.ip_network(merge['into']))]
        assert [ipaddress.ip_network(c) for c in merge['from']] == inside
        if merge['joined']:
            assert len(merge['joined']) >= 2
            assert netaddr.cidr_merge(merge['joined']) == [into]
        else:
            assert merge['into'] in merge['from']
        for item in merge['contained']:
            assert netaddr.IPNetwork(item['cidr']) in netaddr.IPNetwork(item['in'])
            assert item['cidr'] != item['in'] and item['in'] in merge['from']
        assert len(merge['joined']) + len(merge['contained']) + len(merge['duplicates']) \
            + (0 if merge['joined'] else 1) == len(merge['from'])
