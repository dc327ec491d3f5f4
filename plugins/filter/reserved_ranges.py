# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.reserved_ranges filter: upstream's --nomasq-all-reserved-ranges list."""

from __future__ import annotations

DOCUMENTATION = r"""
name: reserved_ranges
short_description: Add the reserved IPv4 ranges the Kubernetes ip-masq-agent can exempt
version_added: 1.0.0
description:
  - Returns the input list followed by the reserved IPv4 ranges that the Kubernetes ip-masq-agent
    exempts from masquerading with C(--nomasq-all-reserved-ranges) - C(100.64.0.0/10),
    C(192.0.0.0/24), C(192.0.2.0/24), C(192.88.99.0/24), C(198.18.0.0/15), C(198.51.100.0/24),
    C(203.0.113.0/24) and C(240.0.0.0/4), in that order.
  - With O(upstream_defaults=true) the upstream default list C(10.0.0.0/8), C(172.16.0.0/12) and
    C(192.168.0.0/16) comes first, which gives exactly upstream's default with
    C(--nomasq-all-reserved-ranges).
  - Ranges already in the input (after normalisation) are not added again. Use
    C([] | ipmasq.agent.reserved_ranges) for the ranges alone.
  - The input entries are checked like P(ipmasq.agent.cidr_split#filter) checks them and returned
    normalised.
positional: _input
options:
  _input:
    description: A list of CIDRs to extend; may be empty.
    type: list
    elements: str
    required: true
  upstream_defaults:
    description: Also add upstream's default non-masquerade list, before the reserved ranges.
    type: bool
    default: false
  label:
    description: Name of the list in error messages.
    type: str
requirements:
  - netaddr (Python library, on the controller only)
"""

EXAMPLES = r"""
- name: The reserved ranges alone (for a template)
  ansible.builtin.debug:
    msg: "{{ [] | ipmasq.agent.reserved_ranges }}"
  # ['100.64.0.0/10', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24',
  #  '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4']

- name: Our pod and node networks, plus the reserved ranges
  ansible.builtin.set_fact:
    ip_masq_nonmasquerade_cidrs: "{{ ['10.244.0.0/16', '192.168.10.0/24'] | ipmasq.agent.reserved_ranges }}"

- name: Exactly what upstream uses with --nomasq-all-reserved-ranges and no config file
  ansible.builtin.set_fact:
    ip_masq_nonmasquerade_cidrs: "{{ [] | ipmasq.agent.reserved_ranges(upstream_defaults=true) }}"
  # ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', ..., '240.0.0.0/4']
"""

RETURN = r"""
_value:
  description: The input, normalised, then the ranges it did not already hold.
  type: list
  elements: str
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import DEFAULT_NONMASQ_CIDRS, RESERVED_RANGES
from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import check_bool, fqcn, parse_list

NAME = fqcn('reserved_ranges')


def reserved_ranges(value, *, upstream_defaults=False, label=None):
    """Return value (normalised) followed by the reserved ranges it does not hold yet."""
    upstream_defaults = check_bool(NAME, 'upstream_defaults', upstream_defaults)
    result = [cidr.text for cidr in parse_list(NAME, value, label)]
    present = set(result)
    extra = (DEFAULT_NONMASQ_CIDRS if upstream_defaults else ()) + RESERVED_RANGES
    for cidr in extra:
        if cidr not in present:
            present.add(cidr)
            result.append(cidr)
    return result


class FilterModule:
    """ipmasq.agent.reserved_ranges"""

    def filters(self):
        return {'reserved_ranges': reserved_ranges}
