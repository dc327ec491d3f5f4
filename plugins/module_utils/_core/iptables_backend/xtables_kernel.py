# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The user-defined chains of a legacy (x_tables) table, asked of the kernel
directly: what ``iptables-legacy-save`` would show, for a node where the
legacy tools are not installed but a legacy nat table exists (written from
a container, or before the node's tools moved to iptables-nft).

Two read-only ``getsockopt`` calls on a raw socket, as iptables-legacy
makes them: ``IPT_SO_GET_INFO`` (the table's size) and
``IPT_SO_GET_ENTRIES`` (its rules); each user-defined chain starts with an
``ERROR`` target that carries its name.  Both calls take the table name in
the buffer they fill, which Python's ``socket.getsockopt`` cannot pass:
libc's is called through ctypes.

Asking for a table the kernel has not made makes it (the module is loaded
and the table created): ask only for a table that /proc lists
(``/proc/net/ip_tables_names``).

Standard library only: this file runs on managed nodes.
"""

import sys

SO_GET_INFO = 64            # IPT_SO_GET_INFO = IP6T_SO_GET_INFO = IPT_BASE_CTL
SO_GET_ENTRIES = 65
LEVELS = {4: 0, 6: 41}      # SOL_IP, SOL_IPV6
TABLE_NAME_LEN = 32
INFO_SIZE = 84              # struct ipt_getinfo (the same for IPv6)
# Where struct ipt_entry / ip6t_entry keeps target_offset (next_offset follows):
# after struct ipt_ip (84 bytes) / ip6t_ip6 (136) and the u32 nfcache.
TARGET_OFFSET_AT = {4: 88, 6: 140}
TARGET_NAME = slice(2, 31)  # struct xt_entry_target: u16 size, char name[29], u8 revision
ERROR_NAME_AT = 32          # the ERROR target's errorname[32], after the target header


def _int(data, offset, size):
    return int.from_bytes(data[offset:offset + size], sys.byteorder)


def chain_names(entries, family):
    """The user-defined chains in a table's entries (the ``IPT_SO_GET_ENTRIES`` blob)."""
    names = []
    at = TARGET_OFFSET_AT[family]
    offset = 0
    while offset + at + 4 <= len(entries):
        target = _int(entries, offset + at, 2)
        step = _int(entries, offset + at + 2, 2)
        if step <= 0 or target >= step:
            break
        head = entries[offset + target:offset + step]
        if head[TARGET_NAME].split(b'\0')[0] == b'ERROR':
            name = head[ERROR_NAME_AT:ERROR_NAME_AT + TABLE_NAME_LEN].split(b'\0')[0].decode('ascii', 'replace')
            if name != 'ERROR':         # the table's end
                names.append(name)
        offset += step
    return names


def chains(family, table='nat'):
    """The user-defined chains of the legacy ``table`` (IPv4 or IPv6), or
    None when the kernel could not be asked."""
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        import _socket  # pylint: disable=import-outside-toplevel

        libc = ctypes.CDLL(None, use_errno=True)
        sock = _socket.socket(_socket.AF_INET if family == 4 else _socket.AF_INET6, _socket.SOCK_RAW,
                              _socket.IPPROTO_RAW)
    except (ImportError, OSError, AttributeError, ValueError):
        return None
    try:
        name = table.encode('ascii')
        info = ctypes.create_string_buffer(name, INFO_SIZE)
        length = ctypes.c_uint(INFO_SIZE)
        if libc.getsockopt(sock.fileno(), LEVELS[family], SO_GET_INFO, info, ctypes.byref(length)) != 0:
            return None
        size = _int(info.raw, INFO_SIZE - 4, 4)
        # struct ipt_get_entries: char name[32], unsigned int size, then the
        # entries, aligned as their u64 counters are.
        align = ctypes.alignment(ctypes.c_uint64)
        head = (TABLE_NAME_LEN + 4 + align - 1) // align * align
        buf = ctypes.create_string_buffer(head + size)
        ctypes.memmove(buf, name, len(name))
        ctypes.memmove(ctypes.addressof(buf) + TABLE_NAME_LEN, size.to_bytes(4, sys.byteorder), 4)
        length = ctypes.c_uint(head + size)
        if libc.getsockopt(sock.fileno(), LEVELS[family], SO_GET_ENTRIES, buf, ctypes.byref(length)) != 0:
            return None     # EAGAIN: the table changed between the two calls; the caller cannot tell
        return chain_names(buf.raw[head:head + size], family)
    finally:
        sock.close()
