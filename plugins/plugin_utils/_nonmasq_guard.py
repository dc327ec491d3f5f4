# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""The non-masquerade list check: the ``ipmasq.agent.nonmasq_guard`` filter and
the role's controller checks (``_role_args``) both call :func:`nonmasq_guard`."""

from __future__ import annotations

from ansible_collections.ipmasq.agent.plugins.plugin_utils._cidr import (
    BARE_ADDRESS_CHOICES, DUPLICATES_CHOICES, HOST_BITS_CHOICES, catch_all_check, check_bool,
    check_choice, fqcn, parse_list,
)

NAME = fqcn('nonmasq_guard')


def nonmasq_guard(value, *, allow_catch_all=False, bare_address='refuse', host_bits='error',
                  duplicates='error', label=None, option_hints=True):
    """Validate a non-masquerade list like cidr_list and refuse one that covers a whole family."""
    allow_catch_all = check_bool(NAME, 'allow_catch_all', allow_catch_all)
    option_hints = check_bool(NAME, 'option_hints', option_hints)
    bare_address = check_choice(NAME, 'bare_address', bare_address, BARE_ADDRESS_CHOICES)
    host_bits = check_choice(NAME, 'host_bits', host_bits, HOST_BITS_CHOICES)
    duplicates = check_choice(NAME, 'duplicates', duplicates, DUPLICATES_CHOICES)
    cidrs = parse_list(NAME, value, label, bare_address=bare_address, host_bits=host_bits,
                       duplicates=duplicates, extra_check=catch_all_check(allow_catch_all),
                       option_hints=option_hints)
    return [cidr.text for cidr in cidrs]
