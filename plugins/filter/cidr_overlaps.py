# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.cidr_overlaps filter: how one list of CIDRs overlaps another."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cidr_overlaps
short_description: Report how the CIDRs of one list overlap those of another
version_added: 1.0.0
description:
  - Compares two lists of CIDRs and returns every overlapping pair (two CIDRs overlap only when one
    contains the other or they are equal), and sorts the entries of the first list into those fully
    covered by the second list taken as a whole, those partly covered and those not covered at all.
  - Typical checks - the pod networks must be fully covered by the non-masquerade list (otherwise
    pod-to-pod traffic between nodes is masqueraded); an "external" service network that lies inside
    a non-masquerade range will not be masqueraded, which deserves a warning.
  - Both lists must hold valid, aligned CIDRs with prefix lengths; otherwise it fails with one error
    that names every bad entry of either list.
positional: _input, other
options:
  _input:
    description: The CIDRs to check.
    type: list
    elements: str
    required: true
  other:
    description: The CIDRs to check against, for example the non-masquerade list.
    type: list
    elements: str
    required: true
  label:
    description: Name of the first list in error messages.
    type: str
  other_label:
    description: Name of the second list in error messages; without it messages say C(the other list).
    type: str
requirements:
  - netaddr (Python library, on the controller only)
"""

EXAMPLES = r"""
- name: The pod networks must not be masqueraded
  ansible.builtin.assert:
    that: (pod_cidrs | ipmasq.agent.cidr_overlaps(ip_masq_nonmasquerade_cidrs)).covered | length == pod_cidrs | length
    fail_msg: >-
      Pod networks not (fully) in ip_masq_nonmasquerade_cidrs:
      {{ (pod_cidrs | ipmasq.agent.cidr_overlaps(ip_masq_nonmasquerade_cidrs)).partly_covered
         + (pod_cidrs | ipmasq.agent.cidr_overlaps(ip_masq_nonmasquerade_cidrs)).not_covered }}

- name: Warn when an external service network will not be masqueraded
  ansible.builtin.debug:
    msg: "WARNING: {{ item.cidr }} lies {{ item.relation }} {{ item.other }}, which is not masqueraded"
  loop: "{{ (external_cidrs | ipmasq.agent.cidr_overlaps(ip_masq_nonmasquerade_cidrs)).overlaps }}"

# ['10.1.0.0/16', '192.168.0.0/23', '8.8.8.0/24'] | ipmasq.agent.cidr_overlaps(['10.0.0.0/8', '192.168.0.0/24'])
# overlaps:
#   - {cidr: 10.1.0.0/16, other: 10.0.0.0/8, relation: inside}
#   - {cidr: 192.168.0.0/23, other: 192.168.0.0/24, relation: contains}
# covered: ['10.1.0.0/16']
# partly_covered: ['192.168.0.0/23']
# not_covered: ['8.8.8.0/24']
"""

RETURN = r"""
_value:
  description: The overlap report.
  type: dict
  contains:
    overlaps:
      description:
        - Every overlapping pair, in the order of the first list, then of the second.
        - C(relation) says how C(cidr) (from the first list) relates to C(other) (from the second)
          - V(inside), V(contains) or V(equal).
      type: list
      elements: dict
    covered:
      description: Entries of the first list whose every address is in some CIDR of the second list.
      type: list
      elements: str
    partly_covered:
      description: Entries of the first list that are covered in part only.
      type: list
      elements: str
    not_covered:
      description: Entries of the first list that share no address with the second list.
      type: list
      elements: str
"""

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import (
    CidrError, check_label, fqcn, overlaps, parse_list, require_netaddr,
)

NAME = fqcn('cidr_overlaps')


def cidr_overlaps(value, other, *, label=None, other_label=None):
    """Return the overlapping pairs and the coverage of value by other."""
    require_netaddr(NAME)
    other_label = check_label(NAME, other_label, 'the other list', 'other_label')
    problems = []
    parsed = []
    for items, name in ((value, label), (other, other_label)):
        try:
            parsed.append(parse_list(NAME, items, name))
        except CidrError as exc:
            problems.append(exc.detail)
    if problems:
        raise CidrError(NAME, '. '.join(problems))
    return overlaps(parsed[0], parsed[1])


class FilterModule:
    """ipmasq.agent.cidr_overlaps"""

    def filters(self):
        return {'cidr_overlaps': cidr_overlaps}
