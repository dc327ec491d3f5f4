"""Which rules drifted (module_utils/_core/engine/drift.py): the rules a rewrite puts
back and takes out, as text. On real iptables and nft, masq_chain's
ipv4.drift and nftables.drift are checked in tests/integration
(test_extensions.py, the drift repairs; test_fleet_ssh.py, the fleet report)."""
from test_nftables import IFACES, _one_interface_less, _sets_in_nft_order, listed  # pylint: disable=import-error

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import drift
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import table as nftables, rules as nftables_rules

A = '-A IP-MASQ-AGENT -d 10.0.0.0/8 -m comment --comment "ip-masq-agent: x" -j RETURN'
B = '-A IP-MASQ-AGENT -d 192.0.2.0/24 -j RETURN'
M = '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: y" -j MASQUERADE'


def test_missing_and_extra_are_named_in_their_own_order_and_counted_as_a_multiset():
    assert drift.compare([A, B, B, M], [A, M, 'x']) == {'missing': ['x'], 'extra': [B, B], 'reordered': False}
    assert drift.compare([M, M], [M]) == {'missing': [], 'extra': [M], 'reordered': False}
    assert drift.compare([], [A, M]) == {'missing': [A, M], 'extra': [], 'reordered': False}


def test_the_same_rules_in_another_order_is_drift_too():
    assert drift.compare([M, A], [A, M]) == {'missing': [], 'extra': [], 'reordered': True}
    assert iptables_rules.chain_drift([M, A], [A, M])['reordered'] is True


def test_iptables_rules_that_differ_only_in_spacing_or_quoting_are_the_same():
    assert iptables_rules.chain_drift([A.replace(' -j', '  -j'), M], [A, M]) is None
    assert iptables_rules.chain_drift([A.replace('"ip-masq-agent: x"', "'ip-masq-agent: x'"), M], [A, M]) is None
    # An unterminated quote is compared as text, not an error.
    unterminated = '-A X --comment "open'
    assert iptables_rules.chain_drift([unterminated], [A]) == {'missing': [A], 'extra': [unterminated], 'reordered': False}


def test_a_repair_log_line_names_each_family_drift_once_and_nothing_else():
    result = {'ipv4': {'drift': drift.compare([B], [A, M] + ['r%d' % i for i in range(6)])},
              'ipv6': {'drift': None},
              'nftables': {'drift': {'rules': drift.compare([], ['masquerade']),
                                     'sets': {'nonmasq-ipv4': {'missing': [], 'extra': ['198.51.100.0/24']}}}}}
    said = set()
    words = backends.drift_words(result, 'IPv4: rewrite chain IP-MASQ-AGENT (1 rules -> 8 rules)', said)
    assert words == 'missing `%s`, `%s`, `r0`, `r1`, `r2` (and 3 more), extra `%s`' % (A, M, B)
    # Its sub-chain's rewrite: the family's drift is said once.
    assert backends.drift_words(result, 'IPv4: rewrite chain IP-MASQ-AGENT-POLICY (1 rules -> 2 rules)', said) == ''
    assert backends.drift_words(result, 'IPv6: rewrite chain IP-MASQ-AGENT (1 rules -> 2 rules)', said) == ''
    assert backends.drift_words(result, 'IPv4: append the POSTROUTING jump to IP-MASQ-AGENT', set()) == ''
    assert backends.drift_words(result, 'nftables: rewrite table inet ip-masq-agent (x)', said) == (
        'chain postrouting: missing `masquerade`; set nonmasq-ipv4: extra `198.51.100.0/24`')
    assert backends.drift_words({'ipv4': {'drift': drift.compare([M, A], [A, M])}},
                                'IPv4: rewrite chain C (2 rules -> 2 rules)', set()) == 'the same rules in another order'


def test_an_nft_rule_whose_anonymous_set_nft_lists_in_its_own_order_is_not_drift():
    """A table rewritten for another reason names only what really differs:
    the rule with ``{ "b0", "lo", "eth0" }`` is the rule sent as
    ``{ "eth0", "b0", "lo" }`` (as nftables.same_rules compares)."""
    desired = nftables_rules.Desired(IFACES)
    found = nftables.table_drift(listed(desired, _sets_in_nft_order), desired)
    assert found['rules'] == {'missing': [], 'extra': [], 'reordered': False}
    found = nftables.table_drift(listed(desired, _one_interface_less), desired)
    assert len(found['rules']['missing']) == len(found['rules']['extra']) >= 1
