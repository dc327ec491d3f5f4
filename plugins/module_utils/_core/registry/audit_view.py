# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Reading the node's nat tables through every registered backend, and only
reading: what the SNAT audit (``_audit/node.py``), the SNAT explanation
(``_explain/node.py``) and the resync's watcher when it backs off
(``_core/agent/standing.py``) read the node with.  :class:`View` asks each
backend's ``audit_read``; every command goes through :func:`read_only`.
``View.tables`` is the one selection of what they count.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import DEFAULT_CHAIN
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends


def _is_read_only(argv):
    """The only commands the audit may run: the listings a registered
    backend declares (``audit_listings``: its tool's name and exact arguments)."""
    if not argv:
        return False
    tool = argv[0].rsplit('/', 1)[-1]
    args = tuple(argv[1:])
    return any(re.match('(?:%s)\\Z' % name, tool) and args == tuple(allowed)
               for cls in backends.REGISTRY for name, allowed in cls.audit_listings)


def read_only(run, commands=None):
    """Wrap ``run`` so that anything but a listing is refused before it runs;
    each command that runs is appended to ``commands`` (a list) as text."""
    def guarded(argv, data=None):
        if data is not None or not _is_read_only(argv):
            raise MasqError('internal error: the SNAT audit refused to run %r (it only reads).' % (argv,))
        if commands is not None:
            commands.append(' '.join(argv))
        return run(argv)
    return guarded


class View:
    """What the backends' audit reads see (``Backend.audit_read``): how to
    reach the node (``run``, refusing anything but a listing, ``find``,
    ``proc_read``, ``legacy_chains``), the audit's ``chain``, ``families``
    and ``include_nft``, its ``notes``; ``tools_found`` is set by a backend
    whose tools are there.  ``findings``: what they found."""

    def __init__(self, run, find, proc_read, families, include_nft, chain=DEFAULT_CHAIN, legacy_chains=None):
        self.commands = []
        self.run = read_only(run, self.commands)
        self.find = find
        self.proc_read = proc_read
        # None: the iptables reader asks the kernel itself (xtables_kernel.chains).
        self.legacy_chains = legacy_chains
        self.families = families
        self.include_nft = include_nft
        self.chain = chain
        self.findings = []
        self.notes = []
        self.tools_found = False
        self._kept = {}

    def kept(self, cls):
        """One object of ``cls`` (made with this view) for the whole audit:
        what a kind of backend shares across its reads.  After every
        backend read a family, its ``done(view, family)`` returns the
        findings it held back until then."""
        if cls not in self._kept:
            self._kept[cls] = cls(self)
        return self._kept[cls]

    @staticmethod
    def tables(findings, families):
        """What counts of ``findings`` (``backend.AuditFinding``, in the
        audit's order): per finding, ``(finding, tables)``, its tables that
        act on one of ``families`` and that no finding shows too (its
        ``shows``: a table two readings hold counts once).  The audit's
        verdict, the explanation's programs and the watcher's back-off line
        all count these."""
        shown = set()
        for finding in findings:
            shown |= finding.shows
        return [(finding, [table for table in finding.tables
                           if table.key not in shown and set(table.families) & set(families)])
                for finding in findings]

    def collect(self):
        """Read every backend the registry holds, in the audit's order."""
        node = backends.Backends(self.run, self.find, proc_read=self.proc_read)
        order = sorted((b for b in node.all if b.audit_rank is not None), key=lambda b: b.audit_rank)
        for family in self.families:
            for backend in order:
                self.findings.extend(backend.audit_read(self, family))
            for kept in list(self._kept.values()):
                self.findings.extend(kept.done(self, family))
        if self.include_nft != 'never':
            for backend in order:
                self.findings.extend(backend.audit_read(self, None))
        return self
