# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.cidr_aggregate_report filter: aggregate and explain what was merged."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cidr_aggregate_report
short_description: Aggregate a list of CIDRs and report what was merged into what
version_added: 1.0.0
description:
  - Computes the same aggregate as P(ipmasq.agent.cidr_aggregate#filter) and explains it, so that a
    user can see why 40 entries became 12.
  - Each input entry ends up in exactly one output CIDR, either unchanged, as a B(duplicate) of an
    earlier entry, B(contained) in another entry, or B(joined) with adjacent entries into a larger
    aligned block.
  - Every entry must be a valid, aligned CIDR with a prefix length; otherwise it fails with one error
    that names every bad entry, as P(ipmasq.agent.cidr_list#filter) does with its default options.
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
seealso:
  - plugin: ipmasq.agent.cidr_aggregate
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Explain the aggregation of the non-masquerade list
  ansible.builtin.debug:
    msg: "{{ report.summary }}: {{ report.merged | map(attribute='reason') }}"
  vars:
    report: "{{ ['10.0.0.0/9', '10.128.0.0/9', '10.1.0.0/16', '10.1.0.0/16', '192.168.0.0/16']
                | ipmasq.agent.cidr_aggregate_report }}"
  # report:
  #   cidrs: ['10.0.0.0/8', '192.168.0.0/16']
  #   input_count: 5
  #   output_count: 2
  #   merged:
  #     - into: 10.0.0.0/8
  #       from: ['10.0.0.0/9', '10.128.0.0/9', '10.1.0.0/16', '10.1.0.0/16']
  #       joined: ['10.0.0.0/9', '10.128.0.0/9']
  #       contained: [{cidr: 10.1.0.0/16, in: 10.0.0.0/9}]
  #       duplicates: ['10.1.0.0/16']
  #       reason: "10.0.0.0/9 and 10.128.0.0/9 are adjacent and together make 10.0.0.0/8;
  #                10.1.0.0/16 is inside 10.0.0.0/9; 10.1.0.0/16 listed more than once"
  #   summary: "5 entries became 2: 1 duplicate dropped, 1 entry inside other entries,
  #             2 adjacent entries joined into 1 block"
"""

RETURN = r"""
_value:
  description: The aggregate and the explanation.
  type: dict
  contains:
    cidrs:
      description: The aggregated CIDRs, as P(ipmasq.agent.cidr_aggregate#filter) returns them.
      type: list
      elements: str
    input_count:
      description: Number of input entries.
      type: int
    output_count:
      description: Number of output CIDRs.
      type: int
    merged:
      description: One item per output CIDR built from more than one input entry, in output order.
        Output CIDRs that are exactly one input entry are not listed.
      type: list
      elements: dict
      contains:
        into:
          description: The output CIDR.
          type: str
        from:
          description: Every input entry that ended up in it, in input order, normalised.
          type: list
          elements: str
        joined:
          description: The entries that are adjacent to each other and together make C(into).
            Empty when one entry is C(into) itself.
          type: list
          elements: str
        contained:
          description: The entries that lie inside another entry (C(cidr)), and that entry (C(in),
            the outermost one).
          type: list
          elements: dict
        duplicates:
          description: The entries dropped as repeats of an earlier identical entry.
          type: list
          elements: str
        reason:
          description: The same in one sentence.
          type: str
    summary:
      description: One line, for example C(40 entries became 12, 3 duplicates dropped, ...).
      type: str
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import Aggregate, fqcn, parse_list

NAME = fqcn('cidr_aggregate_report')


def cidr_aggregate_report(value, *, label=None):
    """Return the aggregate of a list of CIDRs with a report of what was merged into what."""
    return Aggregate(parse_list(NAME, value, label)).report()


class FilterModule:
    """ipmasq.agent.cidr_aggregate_report"""

    def filters(self):
        return {'cidr_aggregate_report': cidr_aggregate_report}
