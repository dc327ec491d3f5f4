# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What stands in our place when the watcher backs off (``watch.py``): the
SNAT rules the nat postrouting path reaches now that are not ours, and
their owners by the audit's rules, in a few words for its journal line.

It reads the node as the SNAT audit does (``_core/registry/audit_view.py``:
every registered backend's ``audit_read``, listings only) and names each
rule's owner with the core's attribution (``_core/engine/attribution.py``)
over the audit's owners as ``scripts/gen_daemons.py`` wrote them
(``owner_table.py``): the install root holds the core alone.  Loaded only
at a back-off, never by a timer or a watch cycle.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import owner_table
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.attribution import Attribution
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import SNAT_TARGETS
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.proc import read_proc
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.audit_view import View

# At most this many rules are named; the others are counted.
NAMED = 3


def sources(run, find, chain, families, proc_read=read_proc):
    """The SNAT rules the nat postrouting path reaches that are not ours
    (the audit's source records, ``walk.source``), each with its ``owner``
    named; a table another reading shows too is read once (as the audit)."""
    view = View(run, find, proc_read, families, 'auto', chain).collect()
    attribution = Attribution(owner_table.OWNERS, owner_table.OURS)
    out = []
    for _finding, tables in View.tables(view.findings, families):
        for table in tables:
            for src in table.sources(chain):
                if src['ours'] or not src['reachable'] or src['target'] not in SNAT_TARGETS:
                    continue
                clues = src['owner']
                src['owner'] = attribution.attribute(src['path'], clues.cond, chain, clues.nft_table)
                out.append(src)
    return out


def rule_words(src):
    """``docker's MASQUERADE (-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE)``."""
    where = ' in %s' % src['chain'] if len(src['path']) > 1 else ''
    owner = src['owner'] if src['owner'] != 'unknown' else 'an unknown owner'
    return "%s's %s%s (%s)" % (owner, src['target'], where, ' '.join(str(src['rule']).split()))


def words(found):
    """The clause of the back-off line: what the nat postrouting path holds in our place."""
    if not found:
        return 'the nat postrouting path now holds no SNAT rule (flushed)'
    named = ', '.join(rule_words(src) for src in found[:NAMED])
    more = ' and %d more' % (len(found) - NAMED) if len(found) > NAMED else ''
    return 'the nat postrouting path now holds %s%s' % (named, more)


def describe(run, find, chain, families):
    """:func:`words` of the node now; a read that fails is said, never raised."""
    try:
        return words(sources(run, find, chain, families))
    except (MasqError, OSError, ValueError) as e:
        return 'what the nat postrouting path now holds could not be read (%s)' % (getattr(e, 'msg', None) or e)
