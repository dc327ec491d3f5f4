"""The ipmasq.agent.cidr test plugin: True only for what the filters accept."""
import pytest
from hypothesis import given, settings, strategies as st

from ansible.errors import AnsibleFilterError
from ansible_collections.ipmasq.agent.plugins.filter.cidr_list import cidr_list
from ansible_collections.ipmasq.agent.plugins.test import cidr as plugin

is_cidr = plugin.cidr


def test_test_module_exposes_the_test():
    assert plugin.TestModule().tests() == {'cidr': is_cidr}


@pytest.mark.parametrize('value', [
    '10.0.0.0/8', '0.0.0.0/0', '192.168.1.7/32', ' 172.16.0.0/12 ', '2001:DB8::/32', '::/0',
    '::ffff:10.0.0.0/104', 'fe80::/10',
])
def test_valid(value):
    assert is_cidr(value) is True


@pytest.mark.parametrize('value', [
    '10.0.0.1/8', 'banana', '', '   ', '10.0.0.1', '2001:db8::1', '10.0.0.0/33', '010.0.0.0/8',
    '10.0.0.0/255.0.0.0', 'fe80::1%eth0/64', None, 8, True, 1.5, ['10.0.0.0/8'], {'cidr': '10.0.0.0/8'},
    b'10.0.0.0/8',
])
def test_invalid_never_raises(value):
    assert is_cidr(value) is False


def test_version():
    assert is_cidr('10.0.0.0/8', 4) is True
    assert is_cidr('10.0.0.0/8', 6) is False
    assert is_cidr('fd00::/8', version=6) is True
    assert is_cidr('fd00::/8', version=4) is False


def test_bare_address_host():
    assert is_cidr('10.0.0.1', bare_address='host') is True
    assert is_cidr('2001:db8::1', 6, bare_address='host') is True
    assert is_cidr('10.0.0.1/8', bare_address='host') is False


@pytest.mark.parametrize('kwargs,phrase', [
    ({'version': 5}, 'option version must be 4 or 6'),
    ({'version': '4'}, 'option version must be 4 or 6'),
    ({'version': True}, 'option version must be 4 or 6'),
    ({'bare_address': 'accept'}, 'option bare_address must be one of refuse, host'),
])
def test_bad_options_raise(kwargs, phrase):
    with pytest.raises(AnsibleFilterError, match='ipmasq.agent.cidr: ' + phrase):
        is_cidr('10.0.0.0/8', **kwargs)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=20), st.from_regex(r'[0-9a-fA-F:.]{0,20}(/[0-9]{1,3})?', fullmatch=True)))
def test_agrees_with_cidr_list(value):
    try:
        cidr_list([value])
    except AnsibleFilterError:
        accepted = False
    else:
        accepted = True
    assert is_cidr(value) is accepted
