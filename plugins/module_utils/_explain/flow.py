# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The flow ``snat_explain`` is asked about, checked before anything runs:
each bad value is an error that names the option and the value.

Standard library only: this file runs on managed nodes.
"""

import ipaddress

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.trace import PROTOCOLS, Flow, proto_number
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import IFNAME_MAX, is_interface_name

# The protocols whose packets carry a destination port.
PORT_PROTOCOLS = ('tcp', 'udp', 'sctp', 'udplite')
MARK_MAX = 0xffffffff


def _address(name, value):
    try:
        return ipaddress.ip_address(str(value).strip() if value is not None else '')
    except ValueError:
        raise MasqError('%s: %r is not an IPv4 or IPv6 address (one address, no prefix length).' % (name, value))


def _proto(value):
    if value is None or value == '':
        return None
    number = proto_number(value) if not isinstance(value, bool) else None
    if number is None or not 0 <= number <= 255:
        raise MasqError('proto: %r is not a protocol: use a name (%s) or a number from 0 to 255.'
                        % (value, ', '.join(sorted(set(PROTOCOLS) - set(['ipv6-icmp'])))))
    return number


def _dport(value, proto):
    if value is None or value == '':
        return None
    try:
        port = int(str(value), 10)
    except ValueError:
        port = None
    if isinstance(value, bool) or port is None or not 1 <= port <= 65535:
        raise MasqError('dport: %r is not a port: use a number from 1 to 65535.' % (value,))
    if proto not in tuple(PROTOCOLS[p] for p in PORT_PROTOCOLS):
        raise MasqError('dport: %r needs proto %s (a protocol with ports); proto is %s.'
                        % (value, ', '.join(PORT_PROTOCOLS), 'not given' if proto is None else proto))
    return port


def _mark(value):
    if value is None or value == '':
        return 0
    try:
        mark = int(str(value).strip(), 0)
    except ValueError:
        mark = None
    if isinstance(value, bool) or mark is None or not 0 <= mark <= MARK_MAX:
        raise MasqError('mark: %r is not a packet mark: use a number from 0 to 0xffffffff (decimal or 0x hex).'
                        % (value,))
    return mark


def _interface(value):
    if value is None or value == '':
        return None
    if not is_interface_name(value):
        raise MasqError('out_interface: %r is not an interface name: 1 to %d letters, digits and _ . - '
                        '(not starting with "-"; no wildcards).' % (value, IFNAME_MAX))
    return value


def parse(src, dst, proto=None, dport=None, out_interface=None, mark=None):
    """A ``trace.Flow`` (without the node's addresses), or MasqError naming the bad value."""
    source, dest = _address('src', src), _address('dst', dst)
    if source.version != dest.version:
        raise MasqError('src %s and dst %s are not of one IP family.' % (source, dest))
    number = _proto(proto)
    return Flow(source, dest, number, _dport(dport, number), _interface(out_interface), _mark(mark))
