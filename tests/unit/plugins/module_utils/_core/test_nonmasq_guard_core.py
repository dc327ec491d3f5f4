"""cidrs.guard_nonmasq_cidrs (the node's core) refuses exactly what the
controller's nonmasq_guard filter refuses: a zone index, a list covering all
of IPv4 or IPv6, duplicates, and every entry the filter cannot read."""
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter.nonmasq_guard import nonmasq_guard
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.cidrs import guard_nonmasq_cidrs, parse_cidrs
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


def core_refuses(value, **options):
    try:
        guard_nonmasq_cidrs(value, **options)
    except MasqError as e:
        assert e.msg.startswith('nonmasquerade_cidrs: ') and e.msg.endswith('Nothing was changed.'), e.msg
        return e.msg
    return None


def filter_refuses(value, allow_catch_all=False, keep_duplicates=False):
    try:
        nonmasq_guard(value, allow_catch_all=allow_catch_all, duplicates='keep' if keep_duplicates else 'error')
    except AnsibleFilterError as e:
        return str(e)
    return None


@pytest.mark.parametrize('value, named', [
    (['fd00::%eth0/8'], "[0] 'fd00::%eth0/8': an IPv6 zone index"),
    (['10.0.0.0/8', '0.0.0.0/0'], "[1] '0.0.0.0/0' covers all of IPv4"),
    (['0.0.0.0/1', '128.0.0.0/1'], "[0] '0.0.0.0/1', [1] '128.0.0.0/1' together cover all of IPv4"),
    (['::/0'], "[0] '::/0' covers all of IPv6"),
    (['10.0.0.0/8', '192.168.0.0/16', '10.0.0.0/8'], "[2] '10.0.0.0/8': a duplicate of [0] '10.0.0.0/8'"),
    (['FD00::/8', 'fd00::/8'], "[1] 'fd00::/8': a duplicate of [0] 'FD00::/8'"),
    (['10.0.0.0/255.0.0.0'], "[0] '10.0.0.0/255.0.0.0': the prefix length must be a number 0-32"),
    (['010.0.0.0/8'], "[0] '010.0.0.0/8': a leading zero"),
    (['10.0.0.1/8'], "[0] '10.0.0.1/8': it has host bits set"),
    (['10.0.0.1'], "[0] '10.0.0.1': an address, not a CIDR"),
])
def test_the_bad_entry_is_named_and_the_filter_refuses_it_too(value, named):
    message = core_refuses(value)
    assert message is not None and named in message, message
    assert filter_refuses(value) is not None


def test_options_accept_what_they_name():
    assert core_refuses(['0.0.0.0/0', '::/0'], allow_catch_all=True) is None
    assert core_refuses(['10.0.0.0/8', '10.0.0.0/8'], keep_duplicates=True) is None
    assert core_refuses(['10.0.0.0/8', '10.0.0.0/8', '0.0.0.0/0'], keep_duplicates=True) is not None


def test_every_problem_in_one_message():
    message = core_refuses(['fd00::%eth0/8', '10.0.0.0/8', '10.0.0.0/8', '0.0.0.0/0'])
    assert message.startswith('nonmasquerade_cidrs: 3 problems: [0] ')
    assert "[2] '10.0.0.0/8': a duplicate" in message and 'covers all of IPv4' in message


def test_the_core_parser_refuses_a_zone_index():
    with pytest.raises(MasqError, match=r"'fd00::%eth0/8': an IPv6 zone index \(%\.\.\.\) has no place in a CIDR"):
        parse_cidrs(['fd00::%eth0/8'], ipv6=True)
    with pytest.raises(MasqError, match='zone index'):
        parse_cidrs(['fe80::1%eth0/128'], ipv6=True)


# Entries near the edge of what either side reads: well-formed CIDRs of both
# families, broken ones in the ways users break them, and catch-all pieces.
_V4 = st.builds(lambda a, p: '%d.%d.%d.%d/%d' % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, p),
                st.integers(0, 2 ** 32 - 1), st.integers(0, 32))
_V4_ALIGNED = st.builds(lambda a, p: '%d.%d.%d.%d/%d' % ((a >> 24) & (0xFF << max(0, 8 - p) & 255), 0, 0, 0, p),
                        st.integers(0, 2 ** 32 - 1), st.integers(0, 8))
_V6 = st.sampled_from(['::/0', '::/1', '8000::/1', 'fd00::/8', 'FD00::/8', 'fd00::1/8', 'fd00::1/128', '::1/128',
                       '::ffff:0.0.0.0/96', '::ffff:0:0/96', 'fd00::%eth0/8', 'fe80::1%1/128', 'fd00:::/8',
                       '2001:db8::/32', '2001:db8::/129', 'fd00::/08', 'fd00::/008', 'fd00::/0008', '1::2::3/64'])
_ODD = st.sampled_from(['0.0.0.0/0', '0.0.0.0/1', '128.0.0.0/1', '128.0.0.0/2', '192.0.0.0/2', '10.0.0.0/8',
                        ' 10.0.0.0/8 ', '10.0.0.0 /8', '010.0.0.0/8', '10.0.0.0/08', '10.0.0.0/008', '10.0.0.0/0008',
                        '10.0.0.0/255.0.0.0', '10.0.0.0/', '10.0.0/8', '10.0.0.0.0/8', '256.0.0.0/8', '10.0.0.0/33',
                        '10.0.0.0/+8', '10.0.0.0/-8', '10.0.0.0/8/8', '10.0.0.1', '', '   ', '1.2.3.4/32',
                        '10.0.0.0/\u0668', '\u0661\u0660.0.0.0/8', '10.0.0.0/8\n', 'fd00::/8\t', 42, None])
ENTRIES = st.one_of(_V4, _V4_ALIGNED, _V6, _ODD)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ENTRIES, max_size=6), st.booleans(), st.booleans())
@example(['fd00::%eth0/8'], False, False)
@example(['0.0.0.0/0'], False, False)
@example(['10.0.0.0/8', '10.0.0.0/8'], False, False)
def test_the_core_and_the_controller_filter_agree(value, allow_catch_all, keep_duplicates):
    core = core_refuses(value, allow_catch_all=allow_catch_all, keep_duplicates=keep_duplicates)
    controller = filter_refuses(value, allow_catch_all=allow_catch_all, keep_duplicates=keep_duplicates)
    assert (core is None) == (controller is None), (value, core, controller)
