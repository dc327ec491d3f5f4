"""ipmasq.agent.nonmasq_guard: cidr_list's checks plus the catch-all guard (seed 000)."""
import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter import nonmasq_guard as plugin
from ansible_collections.ipmasq.agent.plugins.filter.cidr_list import cidr_list
from ansible_collections.ipmasq.agent.plugins.filter.nonmasq_guard import nonmasq_guard

ADVICE = ('list only the pod and node networks', 'use state: absent instead', 'pass allow_catch_all=true',
          'nothing is ever masqueraded')


def error_of(value, **options):
    with pytest.raises(AnsibleFilterError) as info:
        nonmasq_guard(value, **options)
    message = str(info.value)
    assert message.startswith('ipmasq.agent.nonmasq_guard: '), message
    return message


def test_filter_module_exposes_the_filter():
    assert plugin.FilterModule().filters() == {'nonmasq_guard': nonmasq_guard}


@pytest.mark.parametrize('value', [
    [],
    ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'],
    ['0.0.0.0/1'],                              # half of IPv4 is not all of it
    ['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/3', '224.0.0.0/4', '240.0.0.0/5', '248.0.0.0/6',
     '252.0.0.0/7', '254.0.0.0/8'],             # all but 255.0.0.0/8
    ['::/1', 'fd00::/8'],
    ['::ffff:0.0.0.0/96'],                      # IPv4-mapped IPv6 is not all of IPv4
])
def test_lists_that_do_not_cover_a_whole_family_pass_normalised(value):
    assert nonmasq_guard(value) == cidr_list(value)


def test_returns_the_list_normalised_in_order():
    assert nonmasq_guard([' 192.168.0.0/16', 'FD00::/8', '10.0.0.0/8']) == ['192.168.0.0/16', 'fd00::/8', '10.0.0.0/8']


def test_seed_000_catch_all_is_refused_with_what_it_does_and_what_to_do():
    message = error_of(['0.0.0.0/0'], label='NonMasqueradeCIDRs')
    assert message.startswith("ipmasq.agent.nonmasq_guard: 1 problem in NonMasqueradeCIDRs (1 entry): "
                              "[0] '0.0.0.0/0' covers all of IPv4. ")
    for phrase in ADVICE:
        assert phrase in message


def test_ipv6_catch_all_is_refused():
    message = error_of(['10.0.0.0/8', '::/0'])
    assert "[1] '::/0' covers all of IPv6" in message
    assert 'covers all of IPv6 means every destination' in message
    assert 'IPv4' not in message.split('. ', 1)[0]


def test_pieces_that_add_up_to_everything_are_named():
    message = error_of(['10.0.0.0/8', '0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/2', '10.0.0.0/16'])
    assert "[1] '0.0.0.0/1', [2] '128.0.0.0/2' and [3] '192.0.0.0/2' together cover all of IPv4 (0.0.0.0/0)" \
        in message
    # entries inside the pieces are not named as pieces
    assert "[0] '10.0.0.0/8'" not in message and "[4] '10.0.0.0/16'" not in message


def test_both_families_at_once():
    message = error_of(['0.0.0.0/0', '::/1', '8000::/1'])
    assert message.startswith('ipmasq.agent.nonmasq_guard: 2 problems in the list (3 entries): ')
    assert "[0] '0.0.0.0/0' covers all of IPv4" in message
    assert "[1] '::/1' and [2] '8000::/1' together cover all of IPv6 (::/0)" in message
    assert 'covers all of IPv4 and IPv6 means' in message


def test_catch_all_and_bad_entries_are_reported_together():
    message = error_of(['10.0.0.0/8', '10.0.0.1/8', 'banana', '0.0.0.0/0', '10.0.0.0/8'],
                       label='ip_masq_nonmasquerade_cidrs')
    assert message.startswith('ipmasq.agent.nonmasq_guard: 4 problems in ip_masq_nonmasquerade_cidrs (5 entries): ')
    assert "[1] '10.0.0.1/8': host bits set: the aligned network is 10.0.0.0/8" in message
    assert "[2] 'banana': not an IP address or CIDR" in message
    assert "[4] '10.0.0.0/8': duplicate of [0] '10.0.0.0/8'" in message
    assert "[3] '0.0.0.0/0' covers all of IPv4" in message
    for phrase in ADVICE:
        assert phrase in message


def test_allow_catch_all():
    assert nonmasq_guard(['0.0.0.0/0', '::/0'], allow_catch_all=True) == ['0.0.0.0/0', '::/0']
    # still validates the entries
    assert "[1] 'banana'" in error_of(['0.0.0.0/0', 'banana'], allow_catch_all=True)


def test_cidr_list_options_apply():
    assert nonmasq_guard(['10.0.0.1', '10.9.0.0/8', '10.0.0.0/8', 'fd00::1/8'], bare_address='host',
                         host_bits='align', duplicates='drop') == ['10.0.0.1/32', '10.0.0.0/8', 'fd00::/8']
    assert "a bare address" in error_of(['10.0.0.1'])


def test_catch_all_from_pieces_with_other_options():
    assert nonmasq_guard(['0.0.0.0/1', '128.0.0.0/1'], allow_catch_all=True) == ['0.0.0.0/1', '128.0.0.0/1']
    message = error_of(['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/2'], duplicates='drop')
    assert 'together cover all of IPv4' in message


@pytest.mark.parametrize('options,phrase', [
    ({'allow_catch_all': 'yes'}, "option allow_catch_all must be a boolean (true or false); got 'yes'"),
    ({'allow_catch_all': 1}, 'option allow_catch_all must be a boolean'),
    ({'duplicates': 'allow'}, 'option duplicates must be one of error, drop, keep'),
])
def test_bad_options(options, phrase):
    assert phrase in error_of(['10.0.0.0/8'], **options)


def test_input_must_be_a_list():
    assert "got the string '0.0.0.0/0'" in error_of('0.0.0.0/0')


def test_without_option_hints_messages_name_no_filter_option():
    """The role passes option_hints=false: its users cannot pass bare_address or duplicates."""
    with pytest.raises(AnsibleFilterError) as info:
        nonmasq_guard(['10.1.2.3', '10.0.0.0/8', '10.0.0.0/8'], label='ip_masq_nonmasquerade_cidrs of n1',
                      option_hints=False)
    message = str(info.value)
    assert "[0] '10.1.2.3': a bare address, not a CIDR: write 10.1.2.3/32 for the single host" in message
    assert "[2] '10.0.0.0/8': duplicate of [1] '10.0.0.0/8'; remove it" in message
    assert 'bare_address' not in message and 'duplicates=' not in message
    with pytest.raises(AnsibleFilterError) as info:
        nonmasq_guard(['10.1.2.3'], option_hints=False, bare_address='host', allow_catch_all='maybe')
    assert 'allow_catch_all' in str(info.value)


def test_option_hints_is_a_bool():
    with pytest.raises(AnsibleFilterError) as info:
        nonmasq_guard(['10.0.0.0/8'], option_hints='no thanks')
    assert 'option_hints' in str(info.value)
