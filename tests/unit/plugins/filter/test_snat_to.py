"""ipmasq.agent.snat_to: the addresses to SNAT to, validated and normalised on the controller."""
import ipaddress
import socket

import pytest
from hypothesis import given, settings, strategies as st

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter import snat_to as plugin
from ansible_collections.ipmasq.agent.plugins.filter.snat_to import snat_to
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy


def error_of(value, **options):
    with pytest.raises(AnsibleFilterError) as info:
        snat_to(value, **options)
    message = str(info.value)
    assert message.startswith('ipmasq.agent.snat_to: '), message
    return message


def test_filter_module_exposes_the_filter():
    assert plugin.FilterModule().filters() == {'snat_to': snat_to}


@pytest.mark.parametrize('entry,canonical', [
    ('203.0.113.7', '203.0.113.7'),
    (' 203.0.113.7\t', '203.0.113.7'),
    ('203.0.113.7-203.0.113.9', '203.0.113.7-203.0.113.9'),
    ('203.0.113.7 - 203.0.113.9', '203.0.113.7-203.0.113.9'),
    ('203.0.113.7-203.0.113.7', '203.0.113.7'),            # a range of one is the address
    ('192.0.2.255-198.51.100.0', '192.0.2.255-198.51.100.0'),
    ('2001:DB8:0:0::7', '2001:db8::7'),
    ('2001:0db8::7-2001:db8::0009', '2001:db8::7-2001:db8::9'),
    ('fd00:0:0:1:0:0:0:1', 'fd00:0:0:1::1'),
])
def test_normalises_each_entry(entry, canonical):
    assert snat_to([entry], ipv6=True) == [canonical]


def test_one_entry_per_family_in_the_order_given():
    out = snat_to(['2001:db8::7', '203.0.113.7-203.0.113.8'], ipv6=True)
    assert out == ['2001:db8::7', '203.0.113.7-203.0.113.8']
    assert out.__class__ is list and all(item.__class__ is str for item in out)


def test_empty_tuple_and_iterator():
    assert snat_to([]) == []
    assert snat_to(('203.0.113.7',)) == ['203.0.113.7']
    assert snat_to(iter(['203.0.113.7'])) == ['203.0.113.7']


@pytest.mark.parametrize('entry,reason', [
    (7, 'not a string but a number'),
    (None, 'not a string but null'),
    ({'a': 1}, 'not a string but a mapping'),
    ('', 'empty'),
    ('   ', 'empty (only whitespace)'),
    ('banana', "'banana' is not an IP address"),
    ('203.0.113.256', 'an octet is above 255'),
    ('010.0.0.7', 'leading zero'),
    ('203.0.113.7/32', 'a prefix length has no place here: write the address alone, 203.0.113.7'),
    ('203.0.113.0/24', 'write one address or a range such as 203.0.113.1-203.0.113.254'),
    ('2001:db8::/126', 'write one address or a range such as 2001:db8::-2001:db8::3'),
    ('203.0.113.7-', 'a range needs an address on both sides of the dash'),
    ('-203.0.113.7', 'a range needs an address on both sides of the dash'),
    ('203.0.113.7-203.0.113.8-203.0.113.9', 'a range is two addresses joined by one dash'),
    ('203.0.113.9-203.0.113.7', 'the range runs backwards: 203.0.113.9 comes after 203.0.113.7 '
                                '(write 203.0.113.7-203.0.113.9)'),
    ('203.0.113.7-2001:db8::7', 'both ends must be of one family'),
    ('0.0.0.0', 'the unspecified address'),
    ('::', 'the unspecified address'),
    ('127.0.0.1', 'a loopback address'),
    ('::1', 'the loopback address'),
    ('224.0.0.9', 'a multicast address'),
    ('ff02::1', 'a multicast address'),
    ('255.255.255.255', 'the broadcast address'),
    ('203.0.113.7-239.0.0.1', "'239.0.0.1' is a multicast address"),
    ('fe80::1%eth0', 'zone index'),
    ('203.0.113.7 203.0.113.8', 'spaces'),
])
def test_every_bad_entry_is_named_with_its_reason(entry, reason):
    message = error_of(['198.51.100.7', entry], ipv6=True)
    assert message.startswith('ipmasq.agent.snat_to: 1 problem in the list (2 entries): [1] '), message
    assert reason in message, message


def test_all_problems_are_reported_at_once_with_the_label():
    message = error_of(['203.0.113.7', '203.0.113.8', '2001:db8::7', '192.0.2.0/24'], label='ip_masq_snat_to of n1')
    assert message.startswith('ipmasq.agent.snat_to: 3 problems in ip_masq_snat_to of n1 (4 entries): ')
    assert ("[1] '203.0.113.8': a second IPv4 entry after [0] '203.0.113.7': give at most one address or range "
            'per family') in message
    assert "[2] '2001:db8::7': IPv6, but IPv6 is not enabled" in message and 'ip_masq_enable_ipv6' in message
    assert "[3] '192.0.2.0/24': a prefix length has no place here" in message


def test_two_ipv6_entries_are_refused():
    message = error_of(['2001:db8::7', '2001:db8::8-2001:db8::9'], ipv6=True)
    assert "[1] '2001:db8::8-2001:db8::9': a second IPv6 entry after [0] '2001:db8::7'" in message


@pytest.mark.parametrize('value,fragment', [
    ('203.0.113.7', "got the string '203.0.113.7'; even one address must be a list: ['203.0.113.7']"),
    (None, 'got null'),
    ({'a': 1}, 'got a mapping'),
    (7, 'got a number'),
])
def test_the_input_must_be_a_list(value, fragment):
    assert fragment in error_of(value)


@pytest.mark.parametrize('options,fragment', [
    ({'ipv6': 'yes'}, 'option ipv6 must be a boolean'),
    ({'label': ''}, 'option label must be a non-empty string'),
    ({'label': 5}, 'option label must be a non-empty string'),
])
def test_bad_options(options, fragment):
    assert fragment in error_of(['203.0.113.7'], **options)


def _v4(number):
    return str(ipaddress.IPv4Address(number))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=2 ** 32 - 2), st.integers(min_value=0, max_value=2 ** 20))
def test_a_valid_ipv4_range_comes_back_as_the_standard_library_writes_it(first, span):
    last = min(first + span, 2 ** 32 - 2)
    wanted_first, wanted_last = ipaddress.IPv4Address(first), ipaddress.IPv4Address(last)
    never = [a for a in (wanted_first, wanted_last) if a.is_loopback or a.is_multicast]
    entry = '%s-%s' % (_v4(first), _v4(last))
    if never:
        with pytest.raises(AnsibleFilterError):
            snat_to([entry])
        return
    expected = str(wanted_first) if first == last else '%s-%s' % (wanted_first, wanted_last)
    assert snat_to([entry]) == [expected]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=2, max_value=2 ** 128 - 1))
def test_a_valid_ipv6_address_comes_back_as_inet_ntop_writes_it(number):
    """As ip6tables-save prints it (glibc's inet_ntop: ::0.1.0.0, where Python's ipaddress writes ::1:0)."""
    address = ipaddress.IPv6Address(number)
    if address.is_multicast:
        with pytest.raises(AnsibleFilterError):
            snat_to([address.exploded.upper()], ipv6=True)
        return
    assert snat_to([address.exploded.upper()], ipv6=True) == [socket.inet_ntop(socket.AF_INET6, address.packed)]


@pytest.mark.parametrize('value', [
    ['203.0.113.7'], ['203.0.113.7-203.0.113.9', '2001:db8::7'], ['2001:db8::7-2001:db8::9'],
    [' 203.0.113.7 '], ['203.0.113.7-203.0.113.7'],
])
def test_what_the_filter_returns_the_module_accepts(value):
    """The role passes the filter's output to ipmasq.agent.masq_chain: its core must take it."""
    policy = Policy(snat_to=snat_to(value, ipv6=True), ipv6=True)
    assert set(policy.snat_to) == {6 if ':' in v else 4 for v in value}


@pytest.mark.parametrize('value', [
    ['203.0.113.7', '203.0.113.8'], ['203.0.113.9-203.0.113.7'], ['203.0.113.0/24'], ['banana'],
    ['203.0.113.7-2001:db8::7'],
])
def test_what_the_module_refuses_the_filter_refuses_first(value):
    with pytest.raises(MasqError):
        Policy(snat_to=value, ipv6=True)
    with pytest.raises(AnsibleFilterError):
        snat_to(value, ipv6=True)
