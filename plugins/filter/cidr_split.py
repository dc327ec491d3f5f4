# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.cidr_split filter: split a list of CIDRs by address family."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cidr_split
short_description: Split a list of CIDRs into its IPv4 and IPv6 parts
version_added: 1.0.0
description:
  - Returns a dictionary with the IPv4 CIDRs under C(ipv4) and the IPv6 CIDRs under C(ipv6), each in
    canonical text form and in the order given; duplicates are kept.
  - Use it to feed C(iptables) and C(ip6tables) separately, or to skip IPv6 on nodes without it.
  - Every entry must be a valid, aligned CIDR with a prefix length; otherwise it fails with one error
    that names every bad entry, as P(ipmasq.agent.cidr_list#filter) does with its default options.
    Pass the list through P(ipmasq.agent.cidr_list#filter) first to accept bare addresses.
  - An IPv4-mapped IPv6 network such as C(::ffff:10.0.0.0/104) is IPv6.
positional: _input
options:
  _input:
    description: The list of CIDR strings.
    type: list
    elements: str
    required: true
  label:
    description: Name of the list in error messages, for example the variable name.
    type: str
requirements:
  - netaddr (Python library, on the controller only)
"""

EXAMPLES = r"""
- name: One list per family
  ansible.builtin.set_fact:
    nonmasq_by_family: "{{ ['10.0.0.0/8', 'fd00::/8', '192.168.0.0/16'] | ipmasq.agent.cidr_split }}"
  # {'ipv4': ['10.0.0.0/8', '192.168.0.0/16'], 'ipv6': ['fd00::/8']}

- name: Only configure IPv6 when there is something to configure
  ansible.builtin.debug:
    msg: "IPv6 non-masquerade CIDRs: {{ (ip_masq_nonmasquerade_cidrs | ipmasq.agent.cidr_split).ipv6 }}"
  when: (ip_masq_nonmasquerade_cidrs | ipmasq.agent.cidr_split).ipv6 | length > 0
"""

RETURN = r"""
_value:
  description: The CIDRs by family, normalised, order kept.
  type: dict
  contains:
    ipv4:
      description: The IPv4 CIDRs.
      type: list
      elements: str
    ipv6:
      description: The IPv6 CIDRs.
      type: list
      elements: str
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import fqcn, parse_list

NAME = fqcn('cidr_split')


def cidr_split(value, *, label=None):
    """Return {'ipv4': [...], 'ipv6': [...]}, normalised, order kept."""
    result = {'ipv4': [], 'ipv6': []}
    for cidr in parse_list(NAME, value, label):
        result['ipv4' if cidr.version == 4 else 'ipv6'].append(cidr.text)
    return result


class FilterModule:
    """ipmasq.agent.cidr_split"""

    def filters(self):
        return {'cidr_split': cidr_split}
