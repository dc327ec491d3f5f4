"""The options table's hook (``options.register``, ``Option.extra``,
``Policy.extra``, the backends' ``OPTION_RULES``) in pure logic: what it
refuses, that taking an option out gives back every table as it was, and
that an option at its default asks no backend for a rule.
tests/integration/test_option_plugin.py takes the test option
(tests/lab/ipmasq_lab/option_probe.py) to the node, the resync and the unit."""
import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import Option
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import rules as nftables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.rules import Desired

TABLES = ('OPTIONS', 'BY_NAME', 'RESYNC_FLAG_OPTIONS', 'POLICY_OPTIONS', 'EXTRA_OPTIONS', 'CONFIG_FIELDS',
          'EXTENSION_FIELDS', 'EXTENSION_DEFAULTS', 'DEFAULTS', 'ROLE_VARIABLES')


def _comment(value, policy, family, chains):
    out = dict(chains)
    out[policy.chain] = ['-A %s -m comment --comment "ip-masq-agent: %s" -j RETURN' % (policy.chain, value)] \
        + out[policy.chain]
    return out


def _row(**more):
    given = dict(check=lambda value: value.strip(), extra=True, resync_flag='--probe-note')
    given.update(more)
    return Option('probe_note', 'str', None, 'A note.', **given)


def test_the_table_has_no_extra_option_of_its_own():
    assert options.EXTRA_OPTIONS == () and Policy().extra == {}
    assert iptables_rules.OPTION_RULES == {} and nftables_rules.OPTION_RULES == {}


@pytest.mark.parametrize('row', [
    _row(extra=False),                              # not extra: a keyword of Policy would be needed
    _row(key='probeNote'),                          # a config-file key: the file's reader types key by key
    _row(module=False),
    _row(check='a_rule_by_name'),                   # a check the Policy cannot call
    Option('chain', 'str', 'X', 'A name taken.', extra=True),
    'probe_note',
])
def test_register_refuses_a_row_it_cannot_carry(row):
    before = [getattr(options, name) for name in TABLES]
    with pytest.raises(MasqError, match='internal error'):
        options.register(row)
    assert [getattr(options, name) for name in TABLES] == before


def test_registered_then_taken_out_every_table_is_as_before():
    before = dict((name, getattr(options, name)) for name in TABLES)
    unregister = options.register(_row())
    iptables_rules.OPTION_RULES['probe_note'] = _comment
    try:
        assert options.BY_NAME['probe_note'] in options.RESYNC_FLAG_OPTIONS and options.DEFAULTS['probe_note'] is None
        assert options.POLICY_OPTIONS[-1] == 'probe_note' and options.module_spec()['probe_note'] == {'type': 'str'}
        assert options.ROLE_VARIABLES['ip_masq_probe_note'].name == 'probe_note'
        # Checked by the row's check, kept in extra; at its default no backend is asked.
        assert Policy(probe_note=' hello ').extra == {'probe_note': 'hello'}
        assert Policy().extra == {'probe_note': None} and Policy().extra_rules('nftables', {}) == []
        assert iptables_rules.chain_rules(Policy(probe_note='hi'), 4)[0] == (
            '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: hi" -j RETURN')
        assert iptables_rules.chain_rules(Policy(), 4) == iptables_rules.chain_rules(Policy(**{}), 4)
        # A backend without a rule for it is refused by name, before anything is written.
        with pytest.raises(MasqError, match='probe_note: the nftables backend has no rule for it'):
            Desired(Policy(probe_note='hi'))
    finally:
        del iptables_rules.OPTION_RULES['probe_note']
        unregister()
    assert dict((name, getattr(options, name)) for name in TABLES) == before


def test_an_option_the_table_does_not_carry_is_refused_by_name():
    with pytest.raises(MasqError, match=r'^probe_note is not an option of the policy \(no row'):
        Policy(probe_note='hi')
    with pytest.raises(MasqError, match=r'^backend is not an option of the policy \(the module takes it'):
        Policy(backend='iptables')
