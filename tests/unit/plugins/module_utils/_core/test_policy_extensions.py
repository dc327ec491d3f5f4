"""Unit tests of the extensions' pure logic (issue 11): the options'
validation (policy.py), the rules each backend wants for them
(iptables_rules.chain_rules, nftables_rules.Desired), the config file's extension keys
(config.py) and the node's own addresses for snat_to (addresses.py), read
from fixed /proc texts.  The expected rules are written out by hand from the
semantics of the options; tests/integration/test_extensions.py proves them
against the real tools."""
import errno
import ipaddress

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import addresses
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config import config
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import layout as iptables_layout, rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import rules as nftables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import ConfigError, MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy

CHAIN = 'IP-MASQ-AGENT'
NOT_LOCAL = '-m addrtype ! --dst-type LOCAL'
C_RET = 'ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE'
C_MASQ = ('ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come after '
          'cluster-local CIDR matches)')
C_SNAT = ('ip-masq-agent: outbound traffic should be subject to SNAT (this match must come after '
          'cluster-local CIDR matches)')
C_EXC = 'ip-masq-agent: an exception inside the cluster-local CIDRs is subject to %s'
C_LISTED = 'ip-masq-agent: a listed destination is subject to %s'
C_UNLISTED = 'ip-masq-agent: destinations not listed keep their source address'
C_SOURCES = 'ip-masq-agent: traffic from other sources keeps its source address'
C_IFACES = 'ip-masq-agent: traffic leaving by other interfaces keeps its source address'
LOCAL = 'fib daddr type local return comment "ip-masq-agent: local destinations are never subject to MASQUERADE"'


def ipt(rule, comment, target):
    return '-A %s %s-m comment --comment "%s" %s %s' % (CHAIN, rule + ' ' if rule else '', comment, NOT_LOCAL,
                                                        target)


def ret(cidr):
    return ipt('-d ' + cidr, C_RET, '-j RETURN')


def nft(rule, comment):
    return '%s comment "%s"' % (rule, comment)


def nft_ret(match):
    return nft(match + ' return', C_RET)


def refused(fragments, **kwargs):
    with pytest.raises(MasqError) as info:
        Policy(**kwargs)
    for fragment in fragments:
        assert fragment in info.value.msg, (fragment, info.value.msg)
    assert info.value.msg.endswith('Nothing was changed.'), info.value.msg
    return info.value.msg


# --------------------------------------------------------------------------
# Policy: what the options become, and the errors
# --------------------------------------------------------------------------

def test_no_extension_keeps_the_seed_rules():
    pol = Policy(nonmasquerade_cidrs=['172.16.0.0/16', '10.168.0.0/16'], masq_link_local=True)
    assert not pol.extended
    # Seed 000, as iptables-save prints it.
    assert iptables_rules.chain_rules(pol, 4) == [
        ret('172.16.0.0/16'), ret('10.168.0.0/16'), ipt('', C_MASQ, '-j MASQUERADE')]
    desired = nftables_rules.Desired(pol)
    assert desired.set_cidrs == {'nonmasq-ipv4': (4, ['172.16.0.0/16', '10.168.0.0/16'])}
    assert desired.rule_texts() == [
        LOCAL, nft_ret('ip daddr @nonmasq-ipv4'), nft('meta nfproto ipv4 masquerade', C_MASQ)]


def test_what_the_options_become():
    pol = Policy(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'FD00:10::/64'], exception_cidrs=['10.96.0.0/12'],
                 snat_to='203.0.113.7-203.0.113.9, 2001:DB8::7', source_cidrs=['10.244.0.0/16', 'fd00:244::/56'],
                 out_interfaces='eth0,eth1,eth0')
    assert pol.extended and not pol.masquerade_only
    assert pol.exceptions == {4: ['10.96.0.0/12'], 6: []}
    assert pol.snat_to == {4: ('203.0.113.7', '203.0.113.9'), 6: ('2001:DB8::7', '2001:DB8::7')}
    assert pol.sources == {4: ['10.244.0.0/16'], 6: ['fd00:244::/56']}
    assert pol.out_interfaces == ['eth0', 'eth1']
    assert pol.target(4) == ('SNAT', ('203.0.113.7', '203.0.113.9'))
    assert iptables_layout.gates(pol, 6) == [('fd00:244::/56', 'eth0'), ('fd00:244::/56', 'eth1')]
    assert pol.snat_to_require_local is True
    only = Policy(masquerade_cidrs=['198.51.100.0/24'], snat_to=[], out_interfaces=[])
    assert only.masquerade_only and only.listed == {4: ['198.51.100.0/24'], 6: []} and only.cidrs == {4: [], 6: []}
    assert only.target(4) == ('MASQUERADE', None) and iptables_layout.gates(only, 4) == [(None, None)]


BAD = [
    (dict(masquerade_cidrs=['198.51.100.0/24'], nonmasquerade_cidrs=['10.0.0.0/8']),
     ['masquerade_cidrs cannot be combined with nonmasquerade_cidrs']),
    (dict(masquerade_cidrs=['198.51.100.0/24'], exception_cidrs=['10.1.0.0/16']),
     ['masquerade_cidrs cannot be combined with exception_cidrs']),
    (dict(masquerade_cidrs=['198.51.100.0/24'], nomasq_all_reserved_ranges=True),
     ['masquerade_cidrs cannot be combined with nomasq_all_reserved_ranges']),
    (dict(masquerade_cidrs=['198.51.100.0/24', 'banana']), ['masquerade_cidrs', "'banana' is not a CIDR"]),
    (dict(masquerade_cidrs=['10.%d.0.0/16' % i for i in range(65)]), ['masquerade_cidrs: 65 CIDRs', 'cidr_limit 64']),
    (dict(nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['10.96.0.0/12', '192.168.5.0/24', '10.0.0.0/7']),
     ['exception_cidrs: 192.168.5.0/24, 10.0.0.0/7 are not inside nonmasquerade_cidrs', 'remove them']),
    # Link-local counts as kept, unless it is masqueraded.
    (dict(masq_link_local=True, exception_cidrs=['169.254.169.254/32']),
     ['exception_cidrs: 169.254.169.254/32 is not inside nonmasquerade_cidrs', 'remove it']),
    (dict(ipv6=True, nonmasquerade_cidrs=['fd00::/8'], exception_cidrs=['fd00:1::/64', 'fc00::/64']),
     ['exception_cidrs: fc00::/64 is not inside']),
    (dict(exception_cidrs=['fd00::/64']), ['exception_cidrs', "'fd00::/64' is an IPv6 CIDR but ipv6 is not enabled"]),
    (dict(snat_to=['203.0.113.7', '203.0.113.8']), ["snat_to: '203.0.113.7' and '203.0.113.8' are both IPv4"]),
    (dict(ipv6=True, snat_to=['2001:db8::7-2001:db8::9', '2001:db8::1']),
     ["snat_to: '2001:db8::7-2001:db8::9' and '2001:db8::1' are both IPv6"]),
    (dict(snat_to=['2001:db8::7']), ["snat_to: '2001:db8::7' is IPv6 but ipv6 is not enabled"]),
    (dict(snat_to=['203.0.113.0/24']), ["snat_to: '203.0.113.0/24' is not an address"]),
    (dict(snat_to=['203.0.113.7-2001:db8::7']), ["snat_to: '203.0.113.7-2001:db8::7' is not an address"]),
    (dict(snat_to=['eth0']), ["snat_to: 'eth0' is not an address"]),
    (dict(snat_to=['']), ["snat_to: '' is not an address"]),
    (dict(snat_to=['203.0.113.9-203.0.113.7']),
     ["snat_to: '203.0.113.9-203.0.113.7' is a range whose first address comes after its last"]),
    (dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8'], source_cidrs=['10.244.0.0/16']),
     ['source_cidrs lists no IPv6 source while ipv6 is enabled']),
    (dict(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8'], source_cidrs=['fd00:244::/56']),
     ['source_cidrs lists no IPv4 source while ipv6 is enabled']),
    (dict(source_cidrs=['10.244.0.1/16']), ['source_cidrs', "'10.244.0.1/16' is not aligned"]),
    (dict(out_interfaces=['eth0', 'eth 1']), ["out_interfaces: 'eth 1' is not an interface name"]),
    (dict(out_interfaces=['eth+']), ["out_interfaces: 'eth+' is not an interface name", 'no wildcards']),
    (dict(out_interfaces=['eth*']), ["out_interfaces: 'eth*' is not an interface name"]),
    (dict(out_interfaces=['a' * 16]), ["out_interfaces: '%s' is not an interface name" % ('a' * 16), '1 to 15']),
    (dict(out_interfaces=['-eth0']), ["out_interfaces: '-eth0' is not an interface name"]),
    (dict(out_interfaces=['..']), ["out_interfaces: '..' is not an interface name"]),
    (dict(out_interfaces=['eth0', '']), ["out_interfaces: '' is not an interface name"]),
    (dict(out_interfaces=[7]), ["out_interfaces: 7 is not an interface name"]),
    (dict(rule_format='upstream', out_interfaces=['eth0']),
     ['rule_format: upstream', 'which has no out_interfaces', 'use rule_format docs with out_interfaces']),
    (dict(rule_format='upstream', snat_to=['203.0.113.7'], source_cidrs=['10.244.0.0/16']),
     ['no snat_to and no source_cidrs', 'use rule_format docs with snat_to, source_cidrs']),
    (dict(rule_format='upstream', masquerade_cidrs=['198.51.100.0/24'], exception_cidrs=['10.1.0.0/16']),
     ['no exception_cidrs and no masquerade_cidrs']),
]


@pytest.mark.parametrize('kwargs,fragments', BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_options_are_refused_naming_the_value_or_both_options(kwargs, fragments):
    refused(fragments, **kwargs)


def test_snat_to_not_a_list():
    with pytest.raises(MasqError) as info:
        Policy(snat_to={'a': 1})
    assert "snat_to: {'a': 1} is not a list" in info.value.msg


def test_an_exception_inside_the_kept_ranges_is_fine():
    # Inside 10.0.0.0/8, inside link-local (kept), and the whole of a kept range.
    pol = Policy(nonmasquerade_cidrs=['10.0.0.0/8', '192.168.0.0/24', '192.168.1.0/24'],
                 exception_cidrs=['10.96.0.0/12', '169.254.169.254/32', '10.0.0.0/8', '192.168.0.128/25'])
    assert pol.exceptions[4] == ['10.96.0.0/12', '169.254.169.254/32', '10.0.0.0/8', '192.168.0.128/25']
    # A range across two adjacent kept CIDRs lies inside their union.
    Policy(nonmasquerade_cidrs=['192.168.0.0/24', '192.168.1.0/24'], exception_cidrs=['192.168.0.0/23'])
    # The reserved ranges count as kept.
    Policy(nonmasquerade_cidrs=['10.0.0.0/8'], nomasq_all_reserved_ranges=True, exception_cidrs=['198.51.100.0/25'])


def test_empty_values_mean_off():
    for empty in (None, '', []):
        pol = Policy(exception_cidrs=empty, masquerade_cidrs=empty, snat_to=empty, source_cidrs=empty,
                     out_interfaces=empty, rule_format='upstream')
        assert not pol.extended


def test_snat_to_require_local_false_is_kept():
    assert Policy(snat_to=['198.51.100.9'], snat_to_require_local=False).snat_to_require_local is False


# --------------------------------------------------------------------------
# iptables: the chain's rules, as iptables-save prints them
# --------------------------------------------------------------------------

def test_iptables_exceptions_sources_and_two_interfaces():
    # Two sources and two interfaces: the flat form would write each of the
    # 2 rewriting rules for the 4 pairs (8 + 2 RETURN = 10 rules); the split
    # form (issue 18 item 9) checks the interfaces, then the sources, once
    # each (8 rules): the chain goes (-g) to IP-MASQ-AGENT-SOURCES, which goes
    # to IP-MASQ-AGENT-POLICY.
    pol = Policy(nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['10.96.0.0/12'],
                 source_cidrs=['10.244.0.0/16', '10.245.0.0/16'], out_interfaces=['eth0', 'eth1'])
    exc = C_EXC % 'MASQUERADE'
    to_sources = 'ip-masq-agent: traffic leaving by a listed interface goes on to the source check'
    gate = 'ip-masq-agent: traffic from a listed source leaving by a listed interface is subject to the policy'
    layout = iptables_layout.IptablesLayout(pol, 4)
    assert layout.split and layout.two_gates and not layout.rewrite_chain
    assert (layout.count, layout.flat_count) == (8, 10)
    assert iptables_rules.chain_rules(pol, 4) == [
        ipt('-o eth0', to_sources, '-g IP-MASQ-AGENT-SOURCES'),
        ipt('-o eth1', to_sources, '-g IP-MASQ-AGENT-SOURCES'),
        ipt('-s 10.244.0.0/16', gate, '-g IP-MASQ-AGENT-POLICY').replace(CHAIN, CHAIN + '-SOURCES', 1),
        ipt('-s 10.245.0.0/16', gate, '-g IP-MASQ-AGENT-POLICY').replace(CHAIN, CHAIN + '-SOURCES', 1),
        ipt('-d 10.96.0.0/12', exc, '-j MASQUERADE').replace(CHAIN, CHAIN + '-POLICY', 1),
        ret('169.254.0.0/16').replace(CHAIN, CHAIN + '-POLICY', 1),
        ret('10.0.0.0/8').replace(CHAIN, CHAIN + '-POLICY', 1),
        ipt('', C_MASQ, '-j MASQUERADE').replace(CHAIN, CHAIN + '-POLICY', 1),
    ]


def test_iptables_masquerade_only_with_snat_ranges_and_ports_both_families():
    pol = Policy(ipv6=True, masquerade_cidrs=['198.51.100.0/24', '2001:db8:1::/48'],
                 snat_to=['203.0.113.7-203.0.113.9', '2001:db8::7'], to_ports=['1024-65535'],
                 masq_link_local_ipv6=True)
    listed = C_LISTED % 'SNAT'
    assert iptables_rules.chain_rules(pol, 4) == [
        ret('169.254.0.0/16'),
        ipt('-d 198.51.100.0/24 -p tcp', listed, '-j SNAT --to-source 203.0.113.7-203.0.113.9:1024-65535'),
        ipt('-d 198.51.100.0/24 -p udp', listed, '-j SNAT --to-source 203.0.113.7-203.0.113.9:1024-65535'),
        ipt('-d 198.51.100.0/24 -p sctp', listed, '-j SNAT --to-source 203.0.113.7-203.0.113.9:1024-65535'),
        ipt('-d 198.51.100.0/24', listed, '-j SNAT --to-source 203.0.113.7-203.0.113.9'),
    ]
    # ip6tables writes an IPv6 address with a port in brackets; no fe80::/10 RETURN (masq_link_local_ipv6).
    assert iptables_rules.chain_rules(pol, 6) == [
        ipt('-d 2001:db8:1::/48 -p tcp', listed, '-j SNAT --to-source [2001:db8::7]:1024-65535'),
        ipt('-d 2001:db8:1::/48 -p udp', listed, '-j SNAT --to-source [2001:db8::7]:1024-65535'),
        ipt('-d 2001:db8:1::/48 -p sctp', listed, '-j SNAT --to-source [2001:db8::7]:1024-65535'),
        ipt('-d 2001:db8:1::/48', listed, '-j SNAT --to-source 2001:db8::7'),
    ]


def test_iptables_snat_for_one_family_masquerade_for_the_other():
    pol = Policy(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'], snat_to=['2001:db8::7'],
                 random_fully=True, exception_cidrs=['fd00:1::/64'])
    assert iptables_rules.chain_rules(pol, 4) == [
        ret('169.254.0.0/16'), ret('10.0.0.0/8'), ipt('', C_MASQ, '-j MASQUERADE --random-fully')]
    assert iptables_rules.chain_rules(pol, 6) == [
        ipt('-d fd00:1::/64', C_EXC % 'SNAT', '-j SNAT --to-source 2001:db8::7 --random-fully'),
        ret('fe80::/10'), ret('fd00::/8'), ipt('', C_SNAT, '-j SNAT --to-source 2001:db8::7 --random-fully')]


def test_iptables_snat_with_two_port_ranges_picks_a_range_at_random():
    pol = Policy(nonmasquerade_cidrs=['10.0.0.0/8'], snat_to=['203.0.113.7'], to_ports=['1000-1999', '3000-3999'],
                 masq_link_local=True)
    rules = iptables_rules.chain_rules(pol, 4)
    assert rules[0] == ret('10.0.0.0/8') and len(rules) == 1 + 3 * 2 + 1
    # Half of the 2000 ports are in the first range (iptables-save prints 11 decimals).
    assert rules[1] == ('-A %s -p tcp -m comment --comment "%s" %s -m statistic --mode random --probability '
                        '0.50000000000 -j SNAT --to-source 203.0.113.7:1000-1999' % (CHAIN, C_SNAT, NOT_LOCAL))
    assert rules[2] == ipt('-p tcp', C_SNAT, '-j SNAT --to-source 203.0.113.7:3000-3999')
    assert rules[-1] == ipt('', C_SNAT, '-j SNAT --to-source 203.0.113.7')


# --------------------------------------------------------------------------
# nftables: the table a policy wants
# --------------------------------------------------------------------------

def test_nft_exceptions_sources_and_two_interfaces():
    pol = Policy(nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['10.96.0.0/12', '10.97.0.0/16'],
                 source_cidrs=['10.244.0.0/16'], out_interfaces=['eth0', 'eth1'])
    desired = nftables_rules.Desired(pol)
    assert desired.set_cidrs == {'nonmasq-ipv4': (4, ['10.0.0.0/8']),
                                 'exceptions-ipv4': (4, ['10.96.0.0/12', '10.97.0.0/16']),
                                 'sources-ipv4': (4, ['10.244.0.0/16'])}
    # 10.97.0.0/16 lies inside 10.96.0.0/12: the set holds one interval.
    assert desired.elements['exceptions-ipv4'] == [{'prefix': {'addr': '10.96.0.0', 'len': 12}}]
    assert desired.rule_texts() == [
        nft('oifname != { "eth0", "eth1" } return', C_IFACES),
        nft('ip saddr != @sources-ipv4 return', C_SOURCES),
        LOCAL,
        nft('ip daddr @exceptions-ipv4 masquerade', C_EXC % 'MASQUERADE'),
        nft_ret('ip daddr 169.254.0.0/16'),
        nft_ret('ip daddr @nonmasq-ipv4'),
        nft('meta nfproto ipv4 masquerade', C_MASQ),
    ]


def test_nft_masquerade_only_with_snat_ranges_and_ports_both_families():
    pol = Policy(ipv6=True, masquerade_cidrs=['198.51.100.0/24', '2001:db8:1::/48'],
                 snat_to=['203.0.113.7-203.0.113.9', '2001:db8::7'], to_ports=['1024-65535'],
                 masq_link_local_ipv6=True, out_interfaces=['eth0'])
    desired = nftables_rules.Desired(pol)
    assert desired.set_cidrs == {'masq-ipv4': (4, ['198.51.100.0/24']), 'masq-ipv6': (6, ['2001:db8:1::/48'])}
    listed = C_LISTED % 'SNAT'
    assert desired.rule_texts() == [
        nft('oifname != "eth0" return', C_IFACES),
        LOCAL,
        nft_ret('ip daddr 169.254.0.0/16'),
        nft('ip daddr != @masq-ipv4 return', C_UNLISTED),
        nft('ip6 daddr != @masq-ipv6 return', C_UNLISTED),
        nft('meta nfproto ipv4 meta l4proto { tcp, udp, sctp } snat ip to 203.0.113.7-203.0.113.9:1024-65535', listed),
        nft('meta nfproto ipv4 snat ip to 203.0.113.7-203.0.113.9', listed),
        nft('meta nfproto ipv6 meta l4proto { tcp, udp, sctp } snat ip6 to [2001:db8::7]:1024-65535', listed),
        nft('meta nfproto ipv6 snat ip6 to 2001:db8::7', listed),
    ]


def test_nft_snat_for_one_family_sources_for_both():
    pol = Policy(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/64'], snat_to=['203.0.113.7'],
                 source_cidrs=['10.244.0.0/16', 'fd00:244::/56'], random_fully=True)
    desired = nftables_rules.Desired(pol)
    assert list(desired.set_cidrs) == ['nonmasq-ipv4', 'sources-ipv4', 'nonmasq-ipv6', 'sources-ipv6']
    assert desired.rule_texts() == [
        nft('ip saddr != @sources-ipv4 return', C_SOURCES),
        nft('ip6 saddr != @sources-ipv6 return', C_SOURCES),
        LOCAL,
        nft_ret('ip daddr 169.254.0.0/16'),
        nft_ret('ip daddr @nonmasq-ipv4'),
        nft_ret('ip6 daddr fe80::/10'),
        nft_ret('ip6 daddr @nonmasq-ipv6'),
        nft('meta nfproto ipv4 snat ip to 203.0.113.7 fully-random', C_SNAT),
        nft('meta nfproto ipv6 masquerade fully-random', C_MASQ),
    ]


def test_nft_render_desired_shows_the_extension_sets_and_gates():
    """The table as the diff shows it: the exceptions set after the list's, a single interface without braces."""
    pol = Policy(nonmasquerade_cidrs=['10.0.0.0/8'], exception_cidrs=['10.96.0.0/12'], out_interfaces=['eth0'])
    desired = nftables_rules.Desired(pol)
    assert list(desired.set_cidrs) == ['nonmasq-ipv4', 'exceptions-ipv4']
    text = nftables_rules.render_desired(desired)
    assert ('\tset exceptions-ipv4 {\n\t\ttype ipv4_addr\n\t\tflags interval\n'
            '\t\telements = { 10.96.0.0/12 }\n\t}\n') in text
    assert '\t\toifname != "eth0" return comment "%s"\n' % C_IFACES in text


# --------------------------------------------------------------------------
# config.py: the extension keys
# --------------------------------------------------------------------------

def test_config_extension_keys_are_read():
    text = ('nonMasqueradeCIDRs: [10.0.0.0/8]\n'
            'exceptionCIDRs: [10.96.0.0/12, 10.200.1.0/24]\n'
            'SnatTo: 203.0.113.7\n'                    # one string: a list of one; keys fold case
            'snatToRequireLocal: false\n'
            'sourceCIDRs:\n  - 10.244.0.0/16\n'
            'outInterfaces: [eth0, ens5]\n'
            'masqueradeCIDRs: null\n')
    settings, warnings = config.parse_config(text)
    assert warnings == []
    assert config.policy_options(settings) == {
        'exception_cidrs': ['10.96.0.0/12', '10.200.1.0/24'], 'masquerade_cidrs': [], 'snat_to': ['203.0.113.7'],
        'snat_to_require_local': False, 'source_cidrs': ['10.244.0.0/16'], 'out_interfaces': ['eth0', 'ens5']}


def test_config_extension_keys_in_json():
    settings, _warnings = config.parse_config('{"masqueradeCIDRs": ["198.51.100.0/24"], "SNATTO": null, '
                                              '"snatToRequireLocal": null, "nonMasqueradeCIDRs": []}')
    opts = config.policy_options(settings)
    assert opts['masquerade_cidrs'] == ['198.51.100.0/24'] and opts['snat_to'] == []
    assert opts['snat_to_require_local'] is True      # null leaves a bool as it was


def test_config_without_extension_keys_gives_the_defaults():
    settings, _warnings = config.parse_config('nonMasqueradeCIDRs: [10.0.0.0/8]\n')
    assert config.policy_options(settings) == {
        'exception_cidrs': [], 'masquerade_cidrs': [], 'snat_to': [], 'snat_to_require_local': True,
        'source_cidrs': [], 'out_interfaces': []}
    assert config.policy_options(config.defaults())['snat_to_require_local'] is True


@pytest.mark.parametrize('text,fragment', [
    ('outInterfaces: 7\n', 'outInterfaces (line 1) must be a list of strings, not'),
    ('snatTo: {a: b}\n', 'snatTo (line 1) must be a list of strings, not'),
    ('sourceCIDRs: [10.244.0.0/16, 1]\n', 'sourceCIDRs (line 1) must be a list of strings: entry 2 is'),
    ('exceptionCIDRs: [[10.0.0.0/8]]\n', 'exceptionCIDRs (line 1) must be a list of strings: entry 1 is'),
    ('snatToRequireLocal: "no"\n', 'snatToRequireLocal (line 1) must be true or false'),
    ('nonMasqueradeCIDRs: []\nmasqueradeCIDRs: true\n', 'masqueradeCIDRs (line 2) must be a list of strings'),
])
def test_config_extension_keys_wrong_types(text, fragment):
    with pytest.raises(ConfigError) as info:
        config.parse_config(text)
    assert fragment in info.value.msg, info.value.msg


def test_unknown_key_warning_names_the_extension_keys():
    _settings, warnings = config.parse_config('snatFrom: [203.0.113.7]\n')
    assert len(warnings) == 1
    assert ('exceptionCIDRs, masqueradeCIDRs, snatTo, snatToRequireLocal, sourceCIDRs, outInterfaces'
            in warnings[0]), warnings[0]


def test_render_config_writes_the_extension_keys_only_when_set():
    plain = config.defaults()
    assert config.render_config(plain, compact=True) == (
        '{"nonMasqueradeCIDRs":["10.0.0.0/8","172.16.0.0/12","192.168.0.0/16"],"masqLinkLocal":false,'
        '"masqLinkLocalIPv6":false,"resyncInterval":"1m0s","cidrLimit":64}')
    settings, _warnings = config.parse_config('nonMasqueradeCIDRs: [10.0.0.0/8]\nsnatTo: [203.0.113.7]\n'
                                              'snatToRequireLocal: true\noutInterfaces: []\n')
    assert config.render_config(settings, compact=True) == (
        '{"nonMasqueradeCIDRs":["10.0.0.0/8"],"masqLinkLocal":false,"masqLinkLocalIPv6":false,'
        '"resyncInterval":"1m0s","cidrLimit":64,"snatTo":["203.0.113.7"]}')
    settings, _warnings = config.parse_config('snatToRequireLocal: false\nsourceCIDRs: 10.244.0.0/16\n')
    out = config.render_config(settings)
    assert '"snatToRequireLocal": false' in out and '"sourceCIDRs": [\n    "10.244.0.0/16"\n  ]' in out
    assert 'snatTo"' not in out and 'exceptionCIDRs' not in out
    # What is written reads back to the same settings.
    assert config.parse_config(out)[0] == settings


# --------------------------------------------------------------------------
# addresses.py: the node's own addresses, from /proc texts
# --------------------------------------------------------------------------

# /proc/net/fib_trie of a node with 127.0.0.0/8 on lo, 203.0.113.7 and .8 on
# an uplink (its /24 is a link route, .255 the broadcast) and a local route
# 198.51.100.0/28 (ip route add local 198.51.100.0/28 dev lo): the Main
# and Local tables list the same trie.
TRIE = """  +-- 0.0.0.0/0 2 0 2
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.0.0/2 2 0 2
        +-- 198.51.100.0/28 1 0 0
           |-- 198.51.100.0
              /28 host LOCAL
        +-- 203.0.113.0/24 2 0 2
           +-- 203.0.113.0/28 2 0 1
              |-- 203.0.113.0
                 /24 link UNICAST
              |-- 203.0.113.7
                 /32 host LOCAL
              |-- 203.0.113.8
                 /32 host LOCAL
           |-- 203.0.113.255
              /32 link BROADCAST
"""
FIB_TRIE = 'Main:\n' + TRIE + 'Local:\n' + TRIE
IF_INET6 = ('00000000000000000000000000000001 01 80 10 80       lo\n'
            '20010db8000000000000000000000007 03 40 00 82   uplink\n'
            'fe80000000000000c8e1b2fffe0a0b0c 03 40 20 80   uplink\n'
            '\n')


def num(address):
    return int(ipaddress.ip_address(address))


def span(cidr):
    net = ipaddress.ip_network(cidr)
    return int(net.network_address), int(net.broadcast_address)


def test_parse_fib_trie_keeps_the_host_local_routes():
    assert addresses.parse_fib_trie(FIB_TRIE) == [
        span('127.0.0.0/8'), span('198.51.100.0/28'), (num('203.0.113.7'), num('203.0.113.8'))]
    assert addresses.parse_fib_trie('') == []


def test_parse_if_inet6():
    assert addresses.parse_if_inet6(IF_INET6) == [
        (1, 1), (num('2001:db8::7'), num('2001:db8::7')), (num('fe80::c8e1:b2ff:fe0a:b0c'),) * 2]
    assert addresses.parse_if_inet6('garbage\n') == []


def reader(fib=FIB_TRIE, inet6=IF_INET6):
    def read(path):
        text = {addresses.FIB_TRIE: fib, addresses.IF_INET6: inet6}[path]
        if isinstance(text, Exception):
            raise text
        return text
    return read


@pytest.mark.parametrize('snat_to', [
    ['203.0.113.7'], ['203.0.113.7-203.0.113.8'], ['198.51.100.0-198.51.100.15'],
    ['203.0.113.8', '2001:db8::7'],
])
def test_check_snat_local_accepts_the_nodes_addresses(snat_to):
    addresses.check_snat_local(Policy(ipv6=True, snat_to=snat_to), read=reader())


@pytest.mark.parametrize('snat_to,fragments', [
    (['198.51.100.99'], ['snat_to: 198.51.100.99 is not assigned to this node (198.51.100.99 is not among its IPv4']),
    # A range partly assigned: the first missing addresses are named.
    (['203.0.113.7-203.0.113.9'], ['snat_to: 203.0.113.7-203.0.113.9 is not assigned', '(203.0.113.9 is not among']),
    (['203.0.113.6-203.0.113.30'], ['(203.0.113.6, 203.0.113.9-203.0.113.30 are not among']),
    # The first addresses of the range are the node's, the last one is not: the message names the last one.
    (['198.51.100.0-198.51.100.16'], ['(198.51.100.16 is not among']),
    # The network and broadcast addresses of the uplink are not the node's.
    (['203.0.113.255'], ['snat_to: 203.0.113.255 is not assigned']),
    (['203.0.113.7', '2001:db8::8'], ['snat_to: 2001:db8::8 is not assigned', 'IPv6 addresses']),
])
def test_check_snat_local_refuses_other_addresses(snat_to, fragments):
    with pytest.raises(MasqError) as info:
        addresses.check_snat_local(Policy(ipv6=True, snat_to=snat_to), read=reader())
    for fragment in fragments:
        assert fragment in info.value.msg, (fragment, info.value.msg)
    assert 'snat_to_require_local' in info.value.msg and info.value.msg.endswith('Nothing was changed.')


# Addresses that can never be a source (issue 18 item 6): refused by the core
# itself, whether or not the node holds them (lo holds 127.0.0.0/8 and ::1)
# and whatever snat_to_require_local says, in the controller filter's words.
NEVER = [
    ('127.0.0.1', "'127.0.0.1' is a loopback address, which can never be a source address"),
    ('127.1.2.3', "'127.1.2.3' is a loopback address, which can never be a source address"),
    ('::1', "'::1' is the loopback address, which can never be a source address"),
    ('0.0.0.0', "'0.0.0.0' is the unspecified address, which can never be a source address"),
    ('::', "'::' is the unspecified address, which can never be a source address"),
    ('255.255.255.255', "'255.255.255.255' is the broadcast address, which can never be a source address"),
    ('224.0.0.1', "'224.0.0.1' is a multicast address, which can never be a source address"),
    ('239.255.255.255', "'239.255.255.255' is a multicast address, which can never be a source address"),
    ('ff02::1', "'ff02::1' is a multicast address, which can never be a source address"),
    ('203.0.113.7-224.0.0.1', "snat_to: '203.0.113.7-224.0.0.1': '224.0.0.1' is a multicast address"),
    ('127.0.0.1-127.0.0.9', "snat_to: '127.0.0.1-127.0.0.9': '127.0.0.1' is a loopback address"),
    # Ranges whose ends are fine but which span addresses that are not (issue 18 item 6, review)
    ('126.255.255.250-128.0.0.5', "snat_to: '126.255.255.250-128.0.0.5': '127.0.0.0' is a loopback address"),
    ('203.0.113.7-240.0.0.1', "snat_to: '203.0.113.7-240.0.0.1': '224.0.0.0' is a multicast address"),
    ('10.0.0.1-200.0.0.1', "snat_to: '10.0.0.1-200.0.0.1': '127.0.0.0' is a loopback address"),
    # (in IPv6 no such range exists: ::, ::1 and ff00::/8 lie at the two ends)
    ('10.99.0.1-', "snat_to: '10.99.0.1-': a range needs an address on both sides of the dash (first-last)."),
    ('-10.99.0.1', "snat_to: '-10.99.0.1': a range needs an address on both sides of the dash (first-last)."),
    ('10.99.0.1-10.99.0.2-10.99.0.3', 'not an address or a range: a range is two addresses joined by one dash'),
    ('10.99.0.1--10.99.0.3', 'not an address or a range: a range is two addresses joined by one dash'),
]


@pytest.mark.parametrize('address,fragment', NEVER, ids=[a for a, _f in NEVER])
@pytest.mark.parametrize('require_local', [True, False])
def test_an_address_that_can_never_be_a_source_is_refused(address, fragment, require_local):
    def never(path):
        raise AssertionError('read %s' % path)
    with pytest.raises(MasqError) as info:
        pol = Policy(ipv6=True, snat_to=[address], snat_to_require_local=require_local)
        addresses.check_snat_local(pol, read=never)
    assert fragment in info.value.msg, info.value.msg
    assert info.value.msg.startswith('snat_to: ') and info.value.msg.endswith('Nothing was changed.')


@pytest.mark.parametrize('address', [a for a, _f in NEVER])
def test_the_controller_filter_refuses_the_same_addresses_in_the_same_words(address):
    """One rule: the snat_to filter (netaddr, on the controller) gives the
    core's reason word for word."""
    pytest.importorskip('netaddr')
    from ansible_collections.ipmasq.agent.plugins.filter.snat_to import snat_to
    from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import CidrError
    with pytest.raises(MasqError) as core:
        Policy(ipv6=True, snat_to=[address])
    reason = core.value.msg[len('snat_to: '):-len('. Nothing was changed.')]
    reason = reason.split("': ", 1)[1] if reason.startswith("'%s': " % address) else reason
    with pytest.raises(CidrError) as filt:
        snat_to([address], ipv6=True)
    assert '%r: %s' % (address, reason) in str(filt.value), (reason, str(filt.value))


def test_addresses_next_to_the_unusable_ones_are_accepted():
    for address in ('1.0.0.0', '126.255.255.255', '128.0.0.0', '223.255.255.255', '240.0.0.1',
                    '255.255.255.254', '::2', 'fe80::1', 'feff::1', '::ffff:203.0.113.7',
                    '126.0.0.1-126.255.255.255', '128.0.0.0-223.255.255.255', '240.0.0.1-255.255.255.254',
                    '::2-feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'):
        pol = Policy(ipv6=True, snat_to=[address], snat_to_require_local=False)
        first, _dash, last = address.partition('-')
        assert list(pol.snat_to.values()) == [(first, last or first)], address


def test_check_snat_local_skipped_without_snat_to_or_when_not_required():
    def never(path):
        raise AssertionError('read %s' % path)
    addresses.check_snat_local(Policy(), read=never)
    addresses.check_snat_local(Policy(snat_to=['198.51.100.99'], snat_to_require_local=False), read=never)


def test_check_snat_local_without_ipv6_on_the_kernel_or_proc():
    no_file = IOError(errno.ENOENT, 'No such file or directory')
    with pytest.raises(MasqError) as info:
        addresses.check_snat_local(Policy(ipv6=True, snat_to=['2001:db8::7']), read=reader(inet6=no_file))
    assert 'snat_to: 2001:db8::7 is not assigned to this node' in info.value.msg
    denied = IOError(errno.EACCES, 'Permission denied')
    with pytest.raises(MasqError) as info:
        addresses.check_snat_local(Policy(snat_to=['203.0.113.7']), read=reader(fib=denied))
    assert ("snat_to: cannot read the node's addresses (/proc/net/fib_trie) to check 203.0.113.7: Permission denied"
            in info.value.msg)
    assert 'snat_to_require_local to false' in info.value.msg
