# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.cidr_aggregate filter: the smallest equivalent list of CIDRs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cidr_aggregate
short_description: The smallest list of CIDRs that covers exactly the same addresses
version_added: 1.0.0
description:
  - Merges duplicates, CIDRs contained in others, and adjacent CIDRs that together form a larger
    aligned block, and returns the shortest list of CIDRs whose union is exactly the union of the
    input. No address is added or lost.
  - The result is sorted, IPv4 first, then by address; the input order is not kept (in an
    C(IP-MASQ-AGENT) chain of RETURN rules the order of the RETURN rules does not matter).
  - Every entry must be a valid, aligned CIDR with a prefix length; otherwise it fails with one error
    that names every bad entry, as P(ipmasq.agent.cidr_list#filter) does with its default options.
  - To see what was merged into what, use P(ipmasq.agent.cidr_aggregate_report#filter).
positional: _input
options:
  _input:
    description: The list of CIDR strings, IPv4 and IPv6 mixed as you like.
    type: list
    elements: str
    required: true
  label:
    description: Name of the list in error messages, for example the variable name.
    type: str
requirements:
  - netaddr (Python library, on the controller only)
seealso:
  - plugin: ipmasq.agent.cidr_aggregate_report
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Fewer RETURN rules for the same policy
  ansible.builtin.debug:
    msg: "{{ nonmasq | ipmasq.agent.cidr_aggregate }}"
  vars:
    nonmasq:
      - 10.0.0.0/9
      - 10.128.0.0/9      # adjacent to 10.0.0.0/9: together 10.0.0.0/8
      - 10.1.0.0/16       # inside 10.0.0.0/9
      - 192.168.0.0/24
      - 192.168.1.0/24    # adjacent: together 192.168.0.0/23
      - 192.168.2.0/24    # adjacent to that, but 192.168.0.0/23 + this is no single CIDR
      - fd00::/9
      - fd80::/9
  # ['10.0.0.0/8', '192.168.0.0/23', '192.168.2.0/24', 'fd00::/8']
"""

RETURN = r"""
_value:
  description: The aggregated CIDRs in canonical text form, IPv4 first, sorted by address.
  type: list
  elements: str
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import Aggregate, fqcn, parse_list

NAME = fqcn('cidr_aggregate')


def cidr_aggregate(value, *, label=None):
    """Return the smallest sorted list of CIDRs covering exactly the input's addresses."""
    return Aggregate(parse_list(NAME, value, label)).texts()


class FilterModule:
    """ipmasq.agent.cidr_aggregate"""

    def filters(self):
        return {'cidr_aggregate': cidr_aggregate}
