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
``ip nat`` / ``ip6 nat``) from an nftables run, and there, under any chain
name, a rule that carries our comment (one ``NFT_MSG_GETRULE`` dump of the
table, its bytes searched: what a renamed chain left).

The answer is True, False, or None when the kernel could not be asked (no
permission, no netlink): the caller then asks ``nft`` instead.  A kernel
without nf_tables holds no table at all: False.

The question ``('generation',)`` (:func:`generation` asks it alone) is
nf_tables' ruleset generation (``NFT_MSG_GETGEN``): a number every committed
transaction of any writer moves, which the watch mode's safety net compares
with the one its last verified cycle saw.

Standard library only: this file runs on managed nodes.
"""

import errno
import sys

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_GETTABLE = 1
NFT_MSG_GETCHAIN = 4
NFT_MSG_GETRULE = 7
NFT_MSG_NEWGEN = 15
NFT_MSG_GETGEN = 16
NFTA_GEN_ID = 1
NLM_F_REQUEST = 1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
NFTA_TABLE_NAME = 1
NFTA_CHAIN_TABLE = 1
NFTA_CHAIN_NAME = 3
NFTA_RULE_TABLE = 1
NFPROTO = {'unspec': 0, 'inet': 1, 'ip': 2, 'ip6': 10}
HEADER_SIZE = 16        # struct nlmsghdr: u32 len, u16 type, u16 flags, u32 seq, u32 pid (host order)
# No nf_tables in this kernel (or family): nothing can exist there.
_ABSENT = (errno.ENOENT, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT, errno.EOPNOTSUPP)
# What each question answers where the kernel has no nf_tables (otherwise: False).
_NOTHING = {'tables': [], 'generation': None}
TIMEOUT = 5.0
# _socket and integers rather than socket and struct: importing socket (enum,
# selectors) would cost every resync cycle more than all its netlink work.
_ORDER = sys.byteorder


def _u16(value):
    return value.to_bytes(2, _ORDER)


def _u32(value):
    return value.to_bytes(4, _ORDER)


def _int(data, offset, size, signed=False):
    return int.from_bytes(data[offset:offset + size], _ORDER, signed=signed)


def _attr(kind, text):
    data = text.encode('utf-8') + b'\0'
    length = 4 + len(data)
    return _u16(length) + _u16(kind) + data + b'\0' * (-length % 4)


def _message(seq, msg_type, family, attrs, flags=NLM_F_REQUEST):
    # struct nfgenmsg: u8 family, u8 version (NFNETLINK_V0), be16 res_id
    payload = bytes((NFPROTO[family], 0, 0, 0)) + b''.join(attrs)
    return (_u32(HEADER_SIZE + len(payload)) + _u16((NFNL_SUBSYS_NFTABLES << 8) | msg_type) + _u16(flags)
            + _u32(seq) + _u32(0) + payload)


def _replies(sock, seq, rounds=100000):
    """The kernel's messages answering ``seq``, in order, as ``(type, data,
    offset, length)``; last ``(None, ...)`` when the socket closed or sent a
    malformed message. Bounded: a dump sends a table per message, at most."""
    for _round in range(rounds):
        data = sock.recv(65536)
        if not data:
            break
        offset = 0
        while offset + HEADER_SIZE <= len(data):
            length = _int(data, offset, 4)
            if length < HEADER_SIZE:
                yield None, data, offset, length
                return
            if _int(data, offset + 8, 4) == seq:
                yield _int(data, offset + 4, 2), data, offset, length
            offset += (length + 3) & ~3
    yield None, b'', 0, 0


def _error_code(data, offset):
    return -_int(data, offset + HEADER_SIZE, 4, signed=True)


def _attributes(data, at, end):
    """The netlink attributes in ``data[at:end]``, in order, as ``(type,
    value)``; last ``(None, None)`` where one is malformed (nothing after it
    is read).  A message's own start after its struct nfgenmsg:
    ``offset + HEADER_SIZE + 4``."""
    while at + 4 <= end:
        size, kind = _int(data, at, 2), _int(data, at + 2, 2) & 0x3FFF
        if size < 4:
            yield None, None
            return
        yield kind, data[at + 4:at + size]
        at += (size + 3) & ~3


def _names(sock, seq):
    """The NFTA_TABLE_NAME of every table a dump sends, until NLMSG_DONE;
    None on an error other than 'nothing there'."""
    names = []
    for msg_type, data, offset, length in _replies(sock, seq):
        if msg_type is None:
            return None
        if msg_type == NLMSG_DONE:
            return names
        if msg_type == NLMSG_ERROR:
            return [] if _error_code(data, offset) in _ABSENT else None
        for kind, value in _attributes(data, offset + HEADER_SIZE + 4, offset + length):
            if kind is None:
                return None
            if kind == NFTA_TABLE_NAME:
                names.append(value.split(b'\0', 1)[0].decode('utf-8', 'replace'))
    return None


def _carries(sock, seq, needle):
    """Whether any rule a dump sends holds the bytes ``needle`` (a comment
    is kept whole in the rule: iptables-nft's user data, or the comment
    match's own data); None on an error other than 'nothing there'.  The
    whole dump is read, so that the socket is left clean."""
    hit = False
    for msg_type, data, offset, length in _replies(sock, seq):
        if msg_type is None:
            return None
        if msg_type == NLMSG_DONE:
            return hit
        if msg_type == NLMSG_ERROR:
            return False if _error_code(data, offset) in _ABSENT else None
        hit = hit or data.find(needle, offset + HEADER_SIZE, offset + length) >= 0
    return None


def _generation(sock, seq):
    """The NFTA_GEN_ID of the kernel's NFT_MSG_NEWGEN answer; None on an
    error (no nf_tables has no generation either) or a malformed answer."""
    for msg_type, data, offset, length in _replies(sock, seq, rounds=4):
        if msg_type != (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN:
            return None
        for kind, value in _attributes(data, offset + HEADER_SIZE + 4, offset + length):
            if kind is None:
                return None
            if kind == NFTA_GEN_ID and len(value) == 4:
                return int.from_bytes(value, 'big')
        return None
    return None


def _answer(sock, seq):
    """True (the kernel sent the object), False (it does not exist), None (another error)."""
    for msg_type, data, offset, _length in _replies(sock, seq):
        if msg_type is None:
            return None
        if msg_type != NLMSG_ERROR:
            return True
        code = _error_code(data, offset)
        if code == 0:
            return True
        return False if code in _ABSENT else None
    return None


def exist(questions):
    """For each question, ``('table', family, name)`` or ``('chain',
    family, table, name)``: whether it exists (True / False / None); or
    ``('tables', family)``: the names of the family's tables (a list; None
    when the kernel could not be asked); or ``('carries', family, table,
    text)``: whether a rule of the table holds ``text`` (True / False /
    None), as our comment marks ours under any chain name; or
    ``('generation',)``: the ruleset's generation (a number; None when the
    kernel could not be asked, or has no nf_tables).  ``nft`` itself sends
    these requests; none of them changes anything."""
    import _socket  # pylint: disable=import-outside-toplevel

    try:
        sock = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, NETLINK_NETFILTER)
    except (OSError, AttributeError, ValueError) as e:
        code = getattr(e, 'errno', None)
        return [_NOTHING.get(q[0], False) if code in _ABSENT else None for q in questions]
    answers = []
    try:
        sock.settimeout(TIMEOUT)
        sock.bind((0, 0))
        for seq, question in enumerate(questions, 1):
            if question[0] == 'tables':
                sock.send(_message(seq, NFT_MSG_GETTABLE, question[1], [], NLM_F_REQUEST | NLM_F_DUMP))
                answers.append(_names(sock, seq))
                continue
            if question[0] == 'generation':
                sock.send(_message(seq, NFT_MSG_GETGEN, 'unspec', []))
                answers.append(_generation(sock, seq))
                continue
            if question[0] == 'carries':
                sock.send(_message(seq, NFT_MSG_GETRULE, question[1], [_attr(NFTA_RULE_TABLE, question[2])],
                                   NLM_F_REQUEST | NLM_F_DUMP))
                answers.append(_carries(sock, seq, question[3].encode('utf-8')))
                continue
            if question[0] == 'table':
                msg = _message(seq, NFT_MSG_GETTABLE, question[1], [_attr(NFTA_TABLE_NAME, question[2])])
            else:
                msg = _message(seq, NFT_MSG_GETCHAIN, question[1], [_attr(NFTA_CHAIN_TABLE, question[2]),
                                                                    _attr(NFTA_CHAIN_NAME, question[3])])
            sock.send(msg)
            answers.append(_answer(sock, seq))
    except OSError:           # a timeout too (socket.timeout is an OSError)
        answers.extend([None] * (len(questions) - len(answers)))
    finally:
        sock.close()
    return answers


def generation():
    """nf_tables' ruleset generation in this network namespace (the number
    ``NFT_MSG_GETGEN`` answers, which every committed transaction moves), or
    None when the kernel could not be asked: :func:`exist`'s question
    ``('generation',)`` alone.  Read-only, as ``nft`` asks it before every
    transaction."""
    return exist([('generation',)])[0]
