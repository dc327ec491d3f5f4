"""ipmasq.agent.cidr_list: validation, normalisation, every bad input, options."""
import ipaddress
import re
import socket

import pytest
from hypothesis import example, given, settings, strategies as st

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter import cidr_list as plugin
from ansible_collections.ipmasq.agent.plugins.filter.cidr_list import cidr_list


def error_of(value, **options):
    with pytest.raises(AnsibleFilterError) as info:
        cidr_list(value, **options)
    message = str(info.value)
    assert message.startswith('ipmasq.agent.cidr_list: '), message
    return message


def test_filter_module_exposes_the_filter():
    assert plugin.FilterModule().filters() == {'cidr_list': cidr_list}


@pytest.mark.parametrize('given_text,canonical', [
    ('10.0.0.0/8', '10.0.0.0/8'),
    ('  172.16.0.0/12\t', '172.16.0.0/12'),
    ('2001:DB8::/32', '2001:db8::/32'),
    ('2001:0db8:0000:0000:0000:0000:0000:0000/32', '2001:db8::/32'),
    ('2001:db8:0:0:1:0:0:0/80', '2001:db8:0:0:1::/80'),      # longest zero run
    ('2001:db8:0:0:1:0:0:1/128', '2001:db8::1:0:0:1/128'),   # first of equal runs
    ('FE80::/10', 'fe80::/10'),
    ('::FFFF:10.0.0.0/104', '::ffff:10.0.0.0/104'),
    ('0.0.0.0/0', '0.0.0.0/0'),
    ('::/0', '::/0'),
    ('192.168.1.7/32', '192.168.1.7/32'),
    ('10.0.0.0/08', '10.0.0.0/8'),
])
def test_normalises_to_canonical_text(given_text, canonical):
    assert cidr_list([given_text]) == [canonical]


def test_keeps_order_and_returns_plain_strings():
    out = cidr_list(['192.168.0.0/16', 'fd00::/8', '10.0.0.0/8'])
    assert out == ['192.168.0.0/16', 'fd00::/8', '10.0.0.0/8']
    assert out.__class__ is list and all(item.__class__ is str for item in out)


def test_empty_list_is_valid():
    assert cidr_list([]) == []


def test_tuple_and_iterator_inputs():
    assert cidr_list(('10.0.0.0/8',)) == ['10.0.0.0/8']
    assert cidr_list(iter(['10.0.0.0/8', 'fd00::/8'])) == ['10.0.0.0/8', 'fd00::/8']


@pytest.mark.parametrize('entry,reason', [
    (42, 'not a string but a number'),
    (1.5, 'not a string but a number'),
    (True, 'not a string but a boolean'),
    (None, 'not a string but null'),
    ({'cidr': '10.0.0.0/8'}, 'not a string but a mapping'),
    (['10.0.0.0/8'], 'not a string but a list'),
    ('', 'empty'),
    ('   ', 'empty (only whitespace)'),
    ('banana', 'not an IP address or CIDR'),
    ('banana/8', 'not an IP address or CIDR'),
    ('10.0.0/8', 'not an IP address or CIDR'),
    ('10/8', 'not an IP address or CIDR'),
    ('10.0.0.0 /8', 'contains spaces'),
    ('10.0.0.0/8 # pods', 'contains spaces'),
    ('١٠.0.0.0/8', 'non-ASCII'),
    ('1.2.3.256/32', 'an octet is above 255'),
    ('010.0.0.0/8', 'leading zero in an octet'),
    ('10.0.0.0/', "missing prefix length after '/'"),
    ('10.0.0.0/33', 'prefix length /33 is out of range for IPv4 (0-32)'),
    ('2001:db8::/129', 'prefix length /129 is out of range for IPv6 (0-128)'),
    ('10.0.0.0/+8', "'/+8' is not a prefix length"),
    ('10.0.0.0/-0', "'/-0' is not a prefix length"),
    ('10.0.0.0/1000', "'/1000' is not a prefix length"),
    ('10.0.0.0/255.0.0.0', "'/255.0.0.0' is a netmask, not a prefix length; write 10.0.0.0/8"),
    ('10.0.0.0/255.0.255.0', "'/255.0.255.0' is not a prefix length"),
    ('fe80::1%eth0/64', 'zone index'),
    ('10.0.0.0/8/8', 'is not a prefix length'),
])
def test_each_bad_entry_reason(entry, reason):
    message = error_of(['10.0.0.0/8', entry])
    assert '1 problem in the list (2 entries): [1] ' in message
    assert reason in message


def test_host_bits_set_names_the_aligned_network():
    message = error_of(['10.0.0.1/8', '2001:db8::1/32'])
    assert ("[0] '10.0.0.1/8': host bits set: the aligned network is 10.0.0.0/8 "
            '(for the single host write 10.0.0.1/32)') in message
    assert "[1] '2001:db8::1/32': host bits set: the aligned network is 2001:db8::/32" in message
    assert 'write 2001:db8::1/128' in message


def test_host_bits_align_option():
    assert cidr_list(['10.0.0.1/8', '192.168.1.10/24', 'fd00::1/8'], host_bits='align') == \
        ['10.0.0.0/8', '192.168.1.0/24', 'fd00::/8']


def test_bare_address_refused_by_default_and_says_so():
    message = error_of(['10.1.2.3', '2001:db8::5'])
    assert "[0] '10.1.2.3': a bare address, not a CIDR; refused (bare_address=refuse): write 10.1.2.3/32" in message
    assert "[1] '2001:db8::5': a bare address" in message and 'write 2001:db8::5/128' in message
    assert "bare_address='host' to take bare addresses as /32 (IPv4) and /128 (IPv6)" in message


def test_bare_address_host_option():
    assert cidr_list(['10.1.2.3', ' 2001:DB8::5 '], bare_address='host') == ['10.1.2.3/32', '2001:db8::5/128']


def test_duplicates_are_found_after_normalisation():
    message = error_of(['10.0.0.0/8', '2001:db8::/32', '10.0.0.0/8', '2001:DB8:0::/32'])
    assert "[2] '10.0.0.0/8': duplicate of [0] '10.0.0.0/8'; remove it" in message
    assert "[3] '2001:DB8:0::/32': duplicate of [1] '2001:db8::/32' (both are 2001:db8::/32)" in message
    assert message.count('duplicate of') == 2


def test_duplicates_drop_option_keeps_first():
    assert cidr_list(['10.0.0.0/8', 'fd00::/8', ' 10.0.0.0/8', 'FD00::/8', '10.0.0.0/8'], duplicates='drop') == \
        ['10.0.0.0/8', 'fd00::/8']


def test_duplicates_keep_option_keeps_every_entry_normalised():
    assert cidr_list(['10.0.0.0/8', 'fd00::/8', ' 10.0.0.0/8', 'FD00::/8'], duplicates='keep') == \
        ['10.0.0.0/8', 'fd00::/8', '10.0.0.0/8', 'fd00::/8']


def test_duplicate_after_alignment():
    message = error_of(['10.0.0.0/8', '10.9.9.9/8'], host_bits='align')
    assert "[1] '10.9.9.9/8': duplicate of [0] '10.0.0.0/8' (both are 10.0.0.0/8)" in message


def test_every_bad_entry_is_listed_at_once_in_order():
    bad = ['10.0.0.1/8', 'banana', 7, '', '10.0.0.0/8', '1.2.3.4', '10.0.0.0/8']
    message = error_of(bad, label='ip_masq_nonmasquerade_cidrs')
    assert message.startswith('ipmasq.agent.cidr_list: 6 problems in ip_masq_nonmasquerade_cidrs (7 entries): ')
    indexes = [int(i) for i in re.findall(r'(?:^|; )\[(\d+)\]', message.split(': ', 2)[2])]
    assert indexes == [0, 1, 2, 3, 5, 6]


def test_long_bad_value_is_shortened():
    message = error_of(['x' * 500])
    assert 'x' * 50 in message and 'x' * 100 not in message and '...' in message


@pytest.mark.parametrize('value,phrase', [
    ('10.0.0.0/8', "got the string '10.0.0.0/8'; even one CIDR must be a list: ['10.0.0.0/8']"),
    (None, 'got null (is the variable set to nothing in YAML?)'),
    ({'10.0.0.0/8': True}, 'got a mapping'),
    (8, 'got a number'),
    ({'10.0.0.0/8'}, 'got a set'),
])
def test_input_must_be_a_list(value, phrase):
    message = error_of(value)
    assert 'the input must be a list of CIDR strings' in message and phrase in message


def test_label_names_the_list_in_type_errors():
    assert 'pods must be a list of CIDR strings' in error_of('10.0.0.0/8', label='pods')


@pytest.mark.parametrize('options,phrase', [
    ({'bare_address': 'yes'}, 'option bare_address must be one of refuse, host'),
    ({'host_bits': True}, 'option host_bits must be one of error, align'),
    ({'duplicates': 'remove'}, 'option duplicates must be one of error, drop, keep'),
    ({'label': ''}, 'option label must be a non-empty string'),
    ({'label': 5}, 'option label must be a non-empty string'),
])
def test_bad_options(options, phrase):
    assert phrase in error_of(['10.0.0.0/8'], **options)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        cidr_list(['10.0.0.0/8'], 'host')  # pylint: disable=too-many-function-args


# ---------------------------------------------------------------- properties

def _networks():
    v4 = st.tuples(st.just(4), st.integers(0, 2 ** 32 - 1), st.integers(0, 32))
    v6 = st.tuples(st.just(6), st.integers(0, 2 ** 128 - 1), st.integers(0, 128))
    return st.one_of(v4, v6).map(
        lambda t: ipaddress.ip_network((t[1], t[2]), strict=False) if t[0] == 4
        else ipaddress.IPv6Network((t[1], t[2]), strict=False))


def _spellings(net):
    """Equivalent texts a human might write for one network."""
    texts = [str(net), f' {net} ', f'{net.network_address}/{net.prefixlen}\t']
    if net.version == 6:
        texts += [f'{net.network_address.exploded}/{net.prefixlen}',
                  f'{net.network_address.exploded.upper()}/{net.prefixlen}']
    return st.sampled_from(texts)


@settings(max_examples=300, deadline=None)
@given(st.lists(_networks().flatmap(_spellings), max_size=30))
def test_normalisation_is_idempotent_and_keeps_the_networks(texts):
    once = cidr_list(texts, duplicates='drop')
    assert cidr_list(once) == once
    # the same networks, in the same order, as the standard library reads them
    expected = list(dict.fromkeys(ipaddress.ip_network(t.strip()) for t in texts))
    assert [ipaddress.ip_network(t) for t in once] == expected
    assert all(t == t.strip() and t == t.lower() for t in once)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=25))
def test_arbitrary_text_is_either_accepted_as_a_network_or_reported(text):
    try:
        out = cidr_list([text])
    except AnsibleFilterError as exc:
        assert '[0] ' in str(exc)
    else:
        net = ipaddress.ip_network(out[0])
        assert net == ipaddress.ip_network(text.strip())


@settings(max_examples=300, deadline=None)
@example(0x10000, 112)                      # ::0.1.0.0 (glibc prints IPv4-compatible dotted)
@example(0xFFFF01020304, 128)               # ::ffff:1.2.3.4
@example(0xFFFE01020304, 128)               # ::fffe:102:304
@example(1, 128)
@example(0, 0)
@given(st.integers(0, 2 ** 128 - 1), st.integers(0, 128))
def test_ipv6_text_is_what_inet_ntop_prints(value, plen):
    """The canonical IPv6 text is glibc's inet_ntop form, which ip6tables-save prints."""
    first = value & ~((1 << (128 - plen)) - 1)
    written = f'{ipaddress.IPv6Address(first).exploded.upper()}/{plen}'
    assert cidr_list([written]) == [f'{socket.inet_ntop(socket.AF_INET6, first.to_bytes(16, "big"))}/{plen}']
