# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Addresses as numbers and CIDRs as ``(first, last)`` intervals: what an
nftables interval set holds, and what the policy checks coverage with.

Standard library only: this file runs on managed nodes.
"""

BITS = {4: 32, 6: 128}


def _af(family):
    import _socket  # pylint: disable=import-outside-toplevel

    return _socket, (_socket.AF_INET if family == 4 else _socket.AF_INET6)


def address_number(addr, family):
    """An address text as a number (OSError or ValueError when it is not one)."""
    sock, af = _af(family)
    return int.from_bytes(sock.inet_pton(af, addr), 'big')


def number_address(number, family):
    """A number as the address text inet_ntop writes."""
    sock, af = _af(family)
    return sock.inet_ntop(af, number.to_bytes(BITS[family] // 8, 'big'))


def cidr_interval(cidr, family):
    """``(first, last)`` address numbers of a canonical CIDR."""
    addr, _slash, plen = cidr.partition('/')
    first = address_number(addr, family)
    return first, first | ((1 << (BITS[family] - int(plen))) - 1)


def merge(intervals):
    """Sorted intervals with overlapping and adjacent ones joined: what an
    ``auto-merge`` interval set keeps."""
    out = []
    for first, last in sorted(intervals):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def covered(interval, merged):
    """Whether ``interval`` lies wholly inside one of the ``merged``
    intervals (sorted and disjoint, as :func:`merge` returns them): a binary
    search, so checking a long list against a long list stays cheap."""
    import bisect  # pylint: disable=import-outside-toplevel

    first, last = interval
    index = bisect.bisect_right(merged, (first, float('inf'))) - 1
    return index >= 0 and merged[index][0] <= first and last <= merged[index][1]


def cidrs_touching(cidrs, kept):
    """Of ``cidrs`` (canonical CIDR texts of either family, in order), those
    that share an address with the union of ``kept`` (the same)."""
    out = []
    for cidr in cidrs:
        family = 6 if ':' in cidr else 4
        first, last = cidr_interval(cidr, family)
        merged = merge(cidr_interval(c, family) for c in kept if (':' in c) == (family == 6))
        if any(low <= last and high >= first for low, high in merged):
            out.append(cidr)
    return out
