"""ipmasq.agent.cidr_overlaps: pairs and coverage, checked against brute force."""
import ipaddress

import pytest
from hypothesis import given, settings, strategies as st

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter import cidr_overlaps as plugin
from ansible_collections.ipmasq.agent.plugins.filter.cidr_overlaps import cidr_overlaps


def test_filter_module_exposes_the_filter():
    assert plugin.FilterModule().filters() == {'cidr_overlaps': cidr_overlaps}


def test_pod_network_must_be_covered_by_the_non_masquerade_list():
    report = cidr_overlaps(['10.244.0.0/16', '10.245.0.0/16', '10.246.0.0/15', 'fd10::/64'],
                           ['10.244.0.0/16', '10.246.0.0/16', '192.168.0.0/16', 'fd10::/48'])
    assert report == {
        'overlaps': [
            {'cidr': '10.244.0.0/16', 'other': '10.244.0.0/16', 'relation': 'equal'},
            {'cidr': '10.246.0.0/15', 'other': '10.246.0.0/16', 'relation': 'contains'},
            {'cidr': 'fd10::/64', 'other': 'fd10::/48', 'relation': 'inside'},
        ],
        'covered': ['10.244.0.0/16', 'fd10::/64'],
        'partly_covered': ['10.246.0.0/15'],
        'not_covered': ['10.245.0.0/16'],
    }


def test_external_service_network_inside_a_non_masquerade_range():
    report = cidr_overlaps(['172.20.5.0/24', '8.8.8.0/24'], ['10.0.0.0/8', '172.16.0.0/12'])
    assert report['overlaps'] == [{'cidr': '172.20.5.0/24', 'other': '172.16.0.0/12', 'relation': 'inside'}]
    assert report['covered'] == ['172.20.5.0/24'] and report['not_covered'] == ['8.8.8.0/24']


def test_covered_by_pieces_of_the_other_list_together():
    report = cidr_overlaps(['10.0.0.0/8'], ['10.0.0.0/9', '10.128.0.0/10', '10.192.0.0/10'])
    assert report['covered'] == ['10.0.0.0/8']
    assert [p['relation'] for p in report['overlaps']] == ['contains'] * 3


def test_all_pairs_in_order_with_duplicates_and_nesting():
    report = cidr_overlaps(['10.1.0.0/16', '10.1.0.0/16'], ['10.1.2.0/24', '10.0.0.0/8', '10.1.0.0/16', '10.0.0.0/8'])
    assert report['overlaps'] == [
        {'cidr': '10.1.0.0/16', 'other': '10.1.2.0/24', 'relation': 'contains'},
        {'cidr': '10.1.0.0/16', 'other': '10.0.0.0/8', 'relation': 'inside'},
        {'cidr': '10.1.0.0/16', 'other': '10.1.0.0/16', 'relation': 'equal'},
        {'cidr': '10.1.0.0/16', 'other': '10.0.0.0/8', 'relation': 'inside'},
    ] * 2
    assert report['covered'] == ['10.1.0.0/16', '10.1.0.0/16']


def test_families_never_overlap():
    report = cidr_overlaps(['::ffff:10.0.0.0/104', '0.0.0.0/0'], ['10.0.0.0/8', '::/0'])
    assert report['overlaps'] == [
        {'cidr': '::ffff:10.0.0.0/104', 'other': '::/0', 'relation': 'inside'},
        {'cidr': '0.0.0.0/0', 'other': '10.0.0.0/8', 'relation': 'contains'},
    ]
    assert report['partly_covered'] == ['0.0.0.0/0']


def test_empty_lists():
    assert cidr_overlaps([], ['10.0.0.0/8']) == {'overlaps': [], 'covered': [], 'partly_covered': [], 'not_covered': []}
    assert cidr_overlaps(['10.0.0.0/8'], [])['not_covered'] == ['10.0.0.0/8']


def test_bad_entries_of_both_lists_are_named():
    with pytest.raises(AnsibleFilterError) as info:
        cidr_overlaps(['10.0.0.1/8', '10.0.0.0/8'], ['banana', 5], label='pod_cidrs', other_label='nonmasq')
    message = str(info.value)
    assert message.startswith('ipmasq.agent.cidr_overlaps: 1 problem in pod_cidrs (2 entries): '
                              "[0] '10.0.0.1/8': host bits set")
    assert "2 problems in nonmasq (2 entries): [0] 'banana': not an IP address or CIDR; " \
           '[1] 5: not a string but a number' in message


def test_second_list_type_is_checked():
    with pytest.raises(AnsibleFilterError, match="the other list must be a list of CIDR strings, got the string"):
        cidr_overlaps(['10.0.0.0/8'], '10.0.0.0/8')


def test_other_label_must_be_a_string():
    with pytest.raises(AnsibleFilterError, match='ipmasq.agent.cidr_overlaps: option other_label must be a non-empty string'):
        cidr_overlaps(['10.0.0.0/8'], ['10.0.0.0/8'], other_label=['x'])


def test_other_is_required():
    with pytest.raises(TypeError):
        cidr_overlaps(['10.0.0.0/8'])  # pylint: disable=no-value-for-parameter


# ---------------------------------------------------------------- property

def _small_v4():
    # inside 192.168.0.0/26, so that overlaps are frequent and brute force is cheap
    def build(args):
        plen, offset = args
        return str(ipaddress.ip_network((0xC0A80000 + (offset & ~((1 << (32 - plen)) - 1) & 63), plen)))
    return st.tuples(st.integers(26, 32), st.integers(0, 63)).map(build)


def _addresses(text):
    net = ipaddress.ip_network(text)
    return {int(net.network_address) + i for i in range(net.num_addresses)}


@settings(max_examples=300, deadline=None)
@given(st.lists(_small_v4(), max_size=12), st.lists(_small_v4(), max_size=12))
def test_matches_brute_force(first, second):
    report = cidr_overlaps(first, second)
    expected_pairs = []
    for a in first:
        for b in second:
            sa, sb = _addresses(a), _addresses(b)
            if sa & sb:
                expected_pairs.append({'cidr': a, 'other': b,
                                       'relation': 'equal' if sa == sb else 'inside' if sa < sb else 'contains'})
    assert report['overlaps'] == expected_pairs
    union = set().union(*[_addresses(b) for b in second])
    assert report['covered'] == [a for a in first if _addresses(a) <= union]
    assert report['not_covered'] == [a for a in first if not _addresses(a) & union]
    assert report['partly_covered'] == [a for a in first if _addresses(a) & union and not _addresses(a) <= union]
