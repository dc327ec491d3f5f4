# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Reading the node for the SNAT explanation, once and only reading: the
audit's reader (``_core.registry.audit_view.View``: every registered backend's
``audit_read``, every command refused but their listings) and the node's
own addresses (/proc/net/fib_trie, /proc/net/if_inet6: what ``addrtype
--dst-type LOCAL`` and ``fib daddr type local`` ask).

Standard library only: this file runs on managed nodes.
"""

import ipaddress

from ansible_collections.ipmasq.agent.plugins.module_utils._audit.node import INCLUDE_NFT, _no_reader
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import DEFAULT_CHAIN, validate_chain_name
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.proc import read_proc
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.audit_view import View
from ansible_collections.ipmasq.agent.plugins.module_utils._explain.answer import explain, programs_of

FIB_TRIE = '/proc/net/fib_trie'
IF_INET6 = '/proc/net/if_inet6'


def local_addresses(proc_read):
    """The node's own addresses (a set), or None when neither file could be read."""
    found = set()
    words = proc_read(FIB_TRIE)
    for i in range(1, len(words) - 2):
        if words[i] == '/32' and words[i + 1] == 'host' and words[i + 2] == 'LOCAL':
            try:
                found.add(ipaddress.ip_address(words[i - 1]))
            except ValueError:
                pass
    six = proc_read(IF_INET6)
    for i in range(0, len(six) - 5, 6):
        text = six[i]
        if len(text) == 32:
            try:
                found.add(ipaddress.ip_address(':'.join(text[j:j + 4] for j in range(0, 32, 4))))
            except ValueError:
                pass
    if not words and not six:
        return None
    return found


class Reading:
    """What was read of the node: the findings, notes and commands, and the node's addresses."""

    def __init__(self, view, local):
        self.view = view
        self.local = local

    def explain(self, flow, chain=DEFAULT_CHAIN):
        """The answer for ``flow`` (``trace.Flow``; its ``local`` is set here)."""
        flow.local = self.local
        result = explain(programs_of(self.view.findings, flow.family, chain), flow, chain)
        unread = [f.unread[0] for f in self.view.findings if f.unread is not None]
        if unread and result['verdict'] != 'unknown':
            result.update(verdict='unknown', to=None, reason='a nat table was not read: %s' % unread[0])
            result['msg'] = '%s → %s: unknown: %s' % (flow.src, flow.dst, result['reason'])
        result['notes'] = list(self.view.notes) + [note for f in self.view.findings for note in f.notes]
        result['commands'] = list(self.view.commands)
        return result


def read(run, find, family, chain=DEFAULT_CHAIN, include_nft='auto', proc_read=None, legacy_chains=None):
    """Read every nat postrouting chain of ``family`` (4 or 6); a :class:`Reading`."""
    chain = validate_chain_name(chain)
    if include_nft not in INCLUDE_NFT:
        raise MasqError("include_nft: %r is not one of 'auto', 'always', 'never'." % (include_nft,))
    proc_read = proc_read or read_proc
    view = View(run, find, proc_read, (family,), include_nft, chain, legacy_chains).collect()
    if not view.tools_found:
        raise MasqError(_no_reader())
    return Reading(view, local_addresses(proc_read))
