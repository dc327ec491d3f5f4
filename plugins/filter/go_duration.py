# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.go_duration filter: a Go duration (upstream's resyncInterval) in seconds."""

from __future__ import annotations

DOCUMENTATION = r"""
name: go_duration
short_description: Read a Go duration such as the ip-masq-agent's resyncInterval
version_added: 1.0.0
description:
  - Parses a duration in the syntax of Go's C(time.ParseDuration), which the Kubernetes
    ip-masq-agent uses for C(resyncInterval) - for example C(60s), C(1m0s), C(500ms),
    C(1h2m3.5s), C(.5s) or C(0) - and returns it in seconds.
  - The grammar, the units (C(ns), C(us), C(µs), C(ms), C(s), C(m), C(h)), the rounding and the
    overflow limit are Go's, checked by the same code the node-side agent uses to read its
    config file, so a value this filter accepts is one the node accepts. There is no day unit.
  - A bad value fails with an error that names it and says why.
positional: _input
options:
  _input:
    description: The duration, a string.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Seconds between two resyncs
  ansible.builtin.debug:
    msg: "{{ '1m30s' | ipmasq.agent.go_duration }}"
  # 90

- name: Sub-second values come back as a float
  ansible.builtin.debug:
    msg: "{{ '1.5s' | ipmasq.agent.go_duration }}"
  # 1.5

- name: Refuse an interval that is not positive
  ansible.builtin.assert:
    that:
      - (ip_masq_resync_interval | ipmasq.agent.go_duration) > 0
"""

RETURN = r"""
_value:
  description: The duration in seconds; an integer when it is a whole number of seconds, else a float. Negative
    durations (C(-5s)) are returned negative, as Go reads them.
  type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.golang import parse_duration

NAME = 'ipmasq.agent.go_duration'


def go_duration(value):
    """Seconds in the Go duration ``value`` (int when whole, else float)."""
    if not isinstance(value, str):
        raise AnsibleFilterError('%s: the input must be a string such as "60s", not %s %r.'
                                 % (NAME, type(value).__name__, value))
    try:
        return parse_duration(value)
    except MasqError as e:
        raise AnsibleFilterError('%s: %s' % (NAME, e.msg)) from None


class FilterModule:
    """ipmasq.agent.go_duration"""

    def filters(self):
        return {'go_duration': go_duration}
