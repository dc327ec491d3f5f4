"""ipmasq.agent.cidr_split and ipmasq.agent.reserved_ranges."""
import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter import cidr_split as split_plugin
from ansible_collections.ipmasq.agent.plugins.filter import reserved_ranges as reserved_plugin
from ansible_collections.ipmasq.agent.plugins.filter.cidr_split import cidr_split
from ansible_collections.ipmasq.agent.plugins.filter.reserved_ranges import reserved_ranges

# Upstream ip-masq-agent, cmd/ip-masq-agent: --nomasq-all-reserved-ranges, in its order.
UPSTREAM_RESERVED = ['100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24',
                     '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4']
UPSTREAM_DEFAULT = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']


def test_filter_modules_expose_the_filters():
    assert split_plugin.FilterModule().filters() == {'cidr_split': cidr_split}
    assert reserved_plugin.FilterModule().filters() == {'reserved_ranges': reserved_ranges}


def test_split_by_family_order_and_duplicates_kept():
    assert cidr_split(['10.0.0.0/8', 'FD00::/8', '192.168.0.0/16', '::ffff:10.0.0.0/104', '10.0.0.0/8']) == {
        'ipv4': ['10.0.0.0/8', '192.168.0.0/16', '10.0.0.0/8'],
        'ipv6': ['fd00::/8', '::ffff:10.0.0.0/104'],
    }


def test_split_empty():
    assert cidr_split([]) == {'ipv4': [], 'ipv6': []}


def test_split_names_every_bad_entry():
    with pytest.raises(AnsibleFilterError) as info:
        cidr_split(['10.0.0.0/8', None, '2001:db8::1/32', 'fd00::'], label='nonmasq')
    message = str(info.value)
    assert message.startswith('ipmasq.agent.cidr_split: 3 problems in nonmasq (4 entries): ')
    assert '[1] None: not a string but null' in message
    assert "[2] '2001:db8::1/32': host bits set: the aligned network is 2001:db8::/32" in message
    assert "[3] 'fd00::': a bare address" in message


def test_split_refuses_a_mapping():
    with pytest.raises(AnsibleFilterError, match='ipmasq.agent.cidr_split: the input must be a list .* got a mapping'):
        cidr_split({'ipv4': ['10.0.0.0/8']})


def test_reserved_ranges_alone():
    assert reserved_ranges([]) == UPSTREAM_RESERVED


def test_reserved_ranges_with_upstream_defaults_is_upstreams_default_list():
    assert reserved_ranges([], upstream_defaults=True) == UPSTREAM_DEFAULT + UPSTREAM_RESERVED


def test_reserved_ranges_extend_a_list_without_repeating_entries():
    out = reserved_ranges(['10.244.0.0/16', ' 100.64.0.0/10', '192.168.0.0/16'], upstream_defaults=True)
    assert out == ['10.244.0.0/16', '100.64.0.0/10', '192.168.0.0/16', '10.0.0.0/8', '172.16.0.0/12'] + \
        [r for r in UPSTREAM_RESERVED if r != '100.64.0.0/10']
    assert len(out) == len(set(out))


def test_reserved_ranges_are_aligned_and_ipv4():
    assert cidr_split(reserved_ranges([]))['ipv6'] == []


def test_reserved_ranges_validate_the_input():
    with pytest.raises(AnsibleFilterError, match=r"ipmasq.agent.reserved_ranges: 1 problem in the list \(2 entries\): "
                                                 r"\[1\] 'banana'"):
        reserved_ranges(['10.0.0.0/8', 'banana'])


@pytest.mark.parametrize('bad', ['yes', 1, None])
def test_reserved_ranges_option_must_be_boolean(bad):
    with pytest.raises(AnsibleFilterError, match='option upstream_defaults must be a boolean'):
        reserved_ranges([], upstream_defaults=bad)
