# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Whether an nf_tables table or chain exists, asked of the kernel directly.

One ``NFT_MSG_GETTABLE`` or ``NFT_MSG_GETCHAIN`` request per question over
an nfnetlink socket (what ``nft`` itself sends), read-only: tens of
microseconds, where running ``nft`` costs milliseconds.  Every run uses it
to look for ours in the backend it does not write to: our nftables table
from an iptables run, iptables-nft's chain (which nf_tables keeps in
``ip nat`` / ``ip6 nat``) from an nftables run.

The answer is True, False, or None when the kernel could not be asked (no
permission, no netlink): the caller then asks ``nft`` instead.  A kernel
without nf_tables holds no table at all: False.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import socket
import struct

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_GETTABLE = 1
NFT_MSG_GETCHAIN = 4
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NFTA_TABLE_NAME = 1
NFTA_CHAIN_TABLE = 1
NFTA_CHAIN_NAME = 3
NFPROTO = {'inet': 1, 'ip': 2, 'ip6': 10}
_HEADER = struct.Struct('=IHHII')       # struct nlmsghdr
_GENMSG = struct.Struct('=BBH')         # struct nfgenmsg
# No nf_tables in this kernel (or family): nothing can exist there.
_ABSENT = (errno.ENOENT, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT, errno.EOPNOTSUPP)
TIMEOUT = 5.0


def _attr(kind, text):
    data = text.encode('utf-8') + b'\0'
    length = 4 + len(data)
    return struct.pack('=HH', length, kind) + data + b'\0' * (-length % 4)


def _message(seq, msg_type, family, attrs):
    payload = _GENMSG.pack(NFPROTO[family], 0, 0) + b''.join(attrs)
    return _HEADER.pack(_HEADER.size + len(payload), (NFNL_SUBSYS_NFTABLES << 8) | msg_type,
                        NLM_F_REQUEST, seq, 0) + payload


def _answer(sock, seq):
    """True (the kernel sent the object), False (it does not exist), None (another error)."""
    while True:
        data = sock.recv(65536)
        if not data:
            return None
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, msg_type, _flags, reply_seq, _pid = _HEADER.unpack_from(data, offset)
            if length < _HEADER.size:
                return None
            if reply_seq == seq:
                if msg_type != NLMSG_ERROR:
                    return True
                code = -struct.unpack_from('=i', data, offset + _HEADER.size)[0]
                if code == 0:
                    return True
                return False if code in _ABSENT else None
            offset += (length + 3) & ~3


def exist(questions):
    """For each question, ``('table', family, name)`` or ``('chain',
    family, table, name)``: whether it exists (True / False / None)."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    except (OSError, AttributeError, ValueError) as e:
        code = getattr(e, 'errno', None)
        return [False if code in _ABSENT else None for _q in questions]
    answers = []
    try:
        sock.settimeout(TIMEOUT)
        sock.bind((0, 0))
        for seq, question in enumerate(questions, 1):
            if question[0] == 'table':
                msg = _message(seq, NFT_MSG_GETTABLE, question[1], [_attr(NFTA_TABLE_NAME, question[2])])
            else:
                msg = _message(seq, NFT_MSG_GETCHAIN, question[1], [_attr(NFTA_CHAIN_TABLE, question[2]),
                                                                    _attr(NFTA_CHAIN_NAME, question[3])])
            sock.send(msg)
            answers.append(_answer(sock, seq))
    except (OSError, socket.timeout, struct.error):
        answers.extend([None] * (len(questions) - len(answers)))
    finally:
        sock.close()
    return answers
