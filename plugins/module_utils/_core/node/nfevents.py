# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""nf_tables' own change events, read from the kernel (the resync's watch mode).

A ``NETLINK_NETFILTER`` socket that joins the multicast group
``NFNLGRP_NFTABLES`` receives a message for every object a committed
nf_tables transaction added or deleted (``NFT_MSG_NEWRULE``,
``NFT_MSG_DELRULE``, ``NFT_MSG_DELTABLE`` ...), then one
``NFT_MSG_NEWGEN`` naming the generation and the process that committed it
(its pid and name).  Every writer of nf_tables sends them: ``nft``,
iptables-nft (``iptables``, ``iptables-restore``), firewalld.  The legacy
(x_tables) iptables sends none: there is nothing to watch there.

:class:`Events` is the subscription (its ``fileno`` for ``select``);
:meth:`Events.read` returns what is waiting, without blocking, as
:class:`Event` tuples, and reports an overflowed socket buffer
(``ENOBUFS``: the kernel dropped events) as ``overflow`` so that the caller
reads the node at once instead of trusting what it saw.  Nothing here
writes anything.  ``nfnetlink.py`` beside this file asks single questions
(does a table exist); this one only listens.

Standard library only: this file runs on managed nodes.
"""

import collections
import errno

from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.nfnetlink import (
    HEADER_SIZE,
    NETLINK_NETFILTER,
    NFNL_SUBSYS_NFTABLES,
    NFPROTO,
    _attributes,
    _int,
)

NFNLGRP_NFTABLES = 7
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
# enum nf_tables_msg_types (the ones a commit announces).
MESSAGES = {0: 'newtable', 2: 'deltable', 3: 'newchain', 5: 'delchain', 6: 'newrule', 8: 'delrule',
            9: 'newset', 11: 'delset', 12: 'newsetelem', 14: 'delsetelem', 15: 'newgen',
            18: 'newobj', 20: 'delobj', 22: 'newflowtable', 24: 'delflowtable'}
NFT_MSG_NEWGEN = 15
# Attribute 1 of every table-level message names its table (NFTA_TABLE_NAME,
# NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE, ...).
NFTA_TABLE = 1
NFTA_GEN_PROC_PID = 2
NFTA_GEN_PROC_NAME = 3
FAMILY_NAMES = dict((number, name) for name, number in NFPROTO.items())
# Enough for a flush of a large ruleset between two reads; beyond it: ENOBUFS.
RCVBUF = 1 << 20
RECV_SIZE = 1 << 16
# One read() takes at most this many datagrams (bounded; the rest waits for the next).
MAX_DATAGRAMS = 4096

# kind: 'delrule', 'newgen' ...; family: 'ip', 'ip6', 'inet' ... (or the
# number); table: its name (None for newgen); pid, proc: the committing
# process (newgen only).
Event = collections.namedtuple('Event', 'kind family table pid proc')


class Events:
    """A subscription to nf_tables' change events in this network namespace.
    Raises OSError when the kernel refuses it (no nf_tables, no netlink)."""

    def __init__(self, rcvbuf=RCVBUF):
        import _socket  # pylint: disable=import-outside-toplevel

        self._socket = _socket
        self.sock = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.bind((0, 0))
            if rcvbuf:
                self.sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, rcvbuf)
            self.sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NFNLGRP_NFTABLES)
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            raise

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()

    def read(self):
        """``(events, overflow)``: every event waiting now (a list of
        :class:`Event`), and whether the kernel dropped some (ENOBUFS)."""
        events, overflow = [], False
        for _i in range(MAX_DATAGRAMS):
            try:
                data = self.sock.recv(RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    overflow = True      # the kernel dropped events: the socket stays subscribed
                    continue
                raise
            if not data:
                break
            events.extend(parse(data))
        return events, overflow


def _attrs(data, at, end):
    """``{type: bytes}`` of the netlink attributes in ``data[at:end]``."""
    out = {}
    for kind, value in _attributes(data, at, end):
        if kind is None:
            break
        out.setdefault(kind, value)
    return out


def _text(value):
    return value.split(b'\0', 1)[0].decode('utf-8', 'replace') if value is not None else None


def parse(data):
    """The events in one datagram (messages of other subsystems skipped)."""
    out = []
    offset = 0
    while offset + HEADER_SIZE + 4 <= len(data):
        length = _int(data, offset, 4)
        if length < HEADER_SIZE or offset + length > len(data):
            break
        msg_type = _int(data, offset + 4, 2)
        if msg_type >> 8 == NFNL_SUBSYS_NFTABLES:
            kind = MESSAGES.get(msg_type & 0xFF, 'msg%d' % (msg_type & 0xFF))
            family = data[offset + HEADER_SIZE]
            attrs = _attrs(data, offset + HEADER_SIZE + 4, offset + length)
            if msg_type & 0xFF == NFT_MSG_NEWGEN:
                pid = attrs.get(NFTA_GEN_PROC_PID)
                out.append(Event(kind, None, None, int.from_bytes(pid, 'big') if pid and len(pid) == 4 else None,
                                 _text(attrs.get(NFTA_GEN_PROC_NAME))))
            else:
                out.append(Event(kind, FAMILY_NAMES.get(family, family), _text(attrs.get(NFTA_TABLE)), None, None))
        offset += (length + 3) & ~3
    return out
