# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.cidr test: is this value a valid CIDR."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cidr
short_description: Is the value a valid, aligned CIDR
version_added: 1.0.0
description:
  - True when the value is a string holding one IPv4 or IPv6 CIDR that the ipmasq.agent filters
    accept - an address and a prefix length in range, with no host bits set, such as C(10.0.0.0/8) or
    C(2001:db8::/32). Surrounding whitespace and upper-case IPv6 are accepted, as the filters
    normalise them.
  - False for anything else - C(10.0.0.1/8) (host bits set), C(banana), an empty string, a number, a
    list, and a bare address such as C(10.0.0.1) unless O(bare_address=host).
  - It never fails on the tested value, so it suits C(when) conditions and the C(select) and
    C(reject) filters. For the reason an entry is bad, use P(ipmasq.agent.cidr_list#filter).
positional: _input, version
options:
  _input:
    description: The value to test.
    type: raw
    required: true
  version:
    description: Only accept this address family; V(4) or V(6). Without it both are accepted.
    type: int
    choices: [4, 6]
  bare_address:
    description: V(host) accepts a bare address as the single host (C(/32) or C(/128)).
    type: str
    choices: [refuse, host]
    default: refuse
requirements:
  - netaddr (Python library, on the controller only)
seealso:
  - plugin: ipmasq.agent.cidr_list
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Only when the pod network is a valid CIDR
  ansible.builtin.debug:
    msg: "pod network {{ pod_cidr }}"
  when: pod_cidr is ipmasq.agent.cidr

- name: The bad entries of a list, in one expression
  ansible.builtin.debug:
    msg: "{{ ['10.0.0.0/8', 'banana', '10.0.0.1/8'] | reject('ipmasq.agent.cidr') }}"
  # ['banana', '10.0.0.1/8']

- name: IPv6 only
  ansible.builtin.debug:
    msg: "{{ ['10.0.0.0/8', 'fd00::/8'] | select('ipmasq.agent.cidr', 6) }}"
  # ['fd00::/8']
"""

RETURN = r"""
_value:
  description: Whether the value is a valid CIDR (of the family asked for).
  type: bool
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import (
    BARE_ADDRESS_CHOICES, CidrError, check_choice, fqcn, is_cidr, require_netaddr,
)

NAME = fqcn('cidr')


def cidr(value, version=None, *, bare_address='refuse'):
    """Test: is value a string holding one valid, aligned CIDR."""
    require_netaddr(NAME)
    if version is not None and (isinstance(version, bool) or version not in (4, 6)):
        raise CidrError(NAME, f'option version must be 4 or 6; got {version!r}')
    bare_address = check_choice(NAME, 'bare_address', bare_address, BARE_ADDRESS_CHOICES)
    return is_cidr(value, version, bare_address)


class TestModule:
    """ipmasq.agent.cidr"""

    def tests(self):
        return {'cidr': cidr}
