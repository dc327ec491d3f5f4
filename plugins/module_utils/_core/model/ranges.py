# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The address ranges the upstream agent knows by heart (their one home).

Read by the node-side core and by the controller-side filters
(``plugin_utils/_cidr.py``), so both always agree.
"""

# What the Kubernetes ip-masq-agent uses when its config sets no nonMasqueradeCIDRs.
DEFAULT_NONMASQ_CIDRS = ('10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16')

# What upstream's --nomasq-all-reserved-ranges adds (IPv4 only).
RESERVED_RANGES = (
    '100.64.0.0/10',    # RFC 6598, carrier-grade NAT
    '192.0.0.0/24',     # RFC 6890, IETF protocol assignments
    '192.0.2.0/24',     # RFC 5737, TEST-NET-1
    '192.88.99.0/24',   # RFC 7526, 6to4 relay anycast
    '198.18.0.0/15',    # RFC 2544, benchmarking
    '198.51.100.0/24',  # RFC 5737, TEST-NET-2
    '203.0.113.0/24',   # RFC 5737, TEST-NET-3
    '240.0.0.0/4',      # RFC 1112, reserved
)

# Link-local, which gets a RETURN rule unless masqLinkLocal / masqLinkLocalIPv6.
LINK_LOCAL = {4: '169.254.0.0/16', 6: 'fe80::/10'}

# "Everything", which iptables-save prints as no -d match at all.
CATCH_ALL = {4: '0.0.0.0/0', 6: '::/0'}
