# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Reading the node, once, and only reading.

Every registered backend (``_core/backends.py``: ``REGISTRY``) hands the
audit what its own readers show (``Backend.audit_read``): the nat table of
each family as the iptables tools on PATH show it (their flavour asked with
``iptables --version`` first), then as each other iptables flavour's own
tools show it (``iptables-nft-save``, ``iptables-legacy-save``) when that
flavour was not read yet, and the whole nft ruleset (``nft -j list
ruleset``).  A legacy nat table that the kernel has not made (not listed in
/proc/net/ip_tables_names) is not read, because reading it would make it.
Every command goes through :func:`read_only`, which refuses anything but
those listings; what ran is the result's ``commands``.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._audit.allow import parse_allow
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.judge import analyse
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.report import LEGACY_NOTE
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.walk import FAMILY_NAMES
from ansible_collections.ipmasq.agent.plugins.module_utils._core.backends import Backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_tools import PROC_TABLES, legacy_nat_exists, read_proc
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import DEFAULT_CHAIN, validate_chain_name
from ansible_collections.ipmasq.agent.plugins.module_utils._core.xtables_kernel import chains as kernel_chains

INCLUDE_NFT = ('auto', 'always', 'never')
_SAVE = re.compile(r'^ip6?tables(-nft|-legacy)?-save$')
_IPTABLES = re.compile(r'^ip6?tables(-nft|-legacy)?$')


def _is_read_only(argv):
    """The only commands the audit may run: a nat table save, a version
    query, and the nft ruleset listing."""
    if not argv:
        return False
    tool = argv[0].rsplit('/', 1)[-1]
    args = list(argv[1:])
    if _SAVE.match(tool):
        return args == ['-t', 'nat']
    if _IPTABLES.match(tool):
        return args == ['--version']
    if tool == 'nft':
        return args == ['-j', 'list', 'ruleset']
    return False


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
    """What the audit read of the node: the backends put it here
    (``Backend.audit_read``)."""

    def __init__(self, run, find, proc_read, families, include_nft):
        self.commands = []
        self.run = read_only(run, self.commands)
        self.find = find
        self.proc_read = proc_read
        self.families = families
        self.include_nft = include_nft
        self.snapshots = []         # (family, flavour, iptables_save.NatTable)
        self.nft_tables = None      # nft_json tables, when nft was read
        self.notes = []
        self.tools_found = False
        self._flavours = dict((family, set()) for family in families)     # the flavours read (or skipped), per family
        self._closed = set()        # families whose iptables cannot be read at all

    def collect(self):
        """Read every backend the registry holds, in the audit's order."""
        backends = Backends(self.run, self.find, proc_read=self.proc_read)
        order = sorted((b for b in backends.all if b.audit_rank is not None), key=lambda b: b.audit_rank)
        for family in self.families:
            for backend in order:
                backend.audit_read(self, family)
            if family == 4 and not self._flavours[4]:
                self.notes.append('IPv4: iptables-save not found; only nft tables were audited.')
        if self.include_nft != 'never':
            for backend in order:
                backend.audit_read(self, None)
        return self

    def iptables(self, tools, family, flavour):
        """The nat table of ``family`` as ``tools`` (``iptables_tools.Tools``) show
        it; ``flavour``: theirs, or None (the tools on PATH: asked).  A
        flavour already read for the family is not read twice."""
        if family not in self._flavours or family in self._closed or not tools.save_bin:
            return
        if flavour is not None and flavour in self._flavours[family]:
            return
        self.tools_found = True
        try:
            flavour, table = self._nat(tools, family, flavour)
        except MasqError as e:
            if family == 4 and flavour is None:
                raise
            self.notes.append('IPv%d: %s; skipped.' % (family, e.msg))
            if flavour is None:
                self._closed.add(family)    # no usable ip6tables (no IPv6 in this kernel?)
            return
        self._flavours[family].add(flavour)
        if table is not None:
            self.snapshots.append((family, flavour, table))

    def _nat(self, tools, family, flavour):
        """``(flavour, table)``; ``table`` is None when it was not read."""
        if flavour is None and tools.iptables:
            flavour = tools.version(strict=False)[1]
        if flavour == 'legacy' and not legacy_nat_exists(self.proc_read, family):
            self.notes.append('IPv%d: the legacy nat table is not loaded in the kernel (%s does not list it): '
                              'it holds no rules, and reading it would create it; skipped.'
                              % (family, PROC_TABLES[family]))
            return flavour, None
        table = tools.read(record=False, ask=False)
        return table.backend or flavour or 'legacy', table

    def ruleset(self, nft):
        """The whole nft ruleset, with ``nft`` (``nft_tools.NftTools``)."""
        if not nft.available:
            if self.include_nft == 'always':
                raise MasqError('include_nft=always but the nft command was not found on the node; '
                                'install the nftables package or set include_nft=auto.')
            self.notes.append('nft not found: tables created with nft directly were not audited.')
            return
        self.tools_found = True
        try:
            self.nft_tables = nft.list_ruleset()
        except MasqError as e:
            if self.include_nft == 'always' or 'rc' not in e.details:
                raise
            self.notes.append(e.msg + '; nft tables were not audited.')


def audit(run, find, chain=DEFAULT_CHAIN, ipv6=False, include_nft='auto', allow=None, proc_read=None,
          legacy_chains=None):
    """Read the node and judge every SNAT source.  Never changes anything:
    every command goes through :func:`read_only`.  ``legacy_chains(family)``:
    the chains of a legacy nat table no tool read (default: asked of the
    kernel, ``xtables_kernel.chains``)."""
    chain = validate_chain_name(chain)
    if include_nft not in INCLUDE_NFT:
        raise MasqError("include_nft: %r is not one of 'auto', 'always', 'never'." % (include_nft,))
    parse_allow(allow)   # bad input fails before anything runs
    families = (4, 6) if ipv6 else (4,)
    proc_read = proc_read or read_proc
    view = View(run, find, proc_read, families, include_nft).collect()
    if not view.tools_found:
        raise MasqError('Neither iptables-save nor nft was found on the node: nothing to audit. '
                        'Install iptables (or nftables).')
    result = analyse(view.snapshots, view.nft_tables, chain=chain, ipv6=ipv6, allow=allow, notes=view.notes)
    result['commands'] = view.commands
    _unread_legacy(result, view.snapshots, chain, families, proc_read, legacy_chains or kernel_chains)
    return result


def _unread_legacy(result, snapshots, chain, families, proc_read, chains):
    """Ours in a legacy nat table this audit could not read (no
    iptables-legacy-save): the kernel lists the table's chains
    (``xtables_kernel``, a read); packets pass that table too, so ours there
    is not only ours."""
    for family in families:
        if any(f == family and flavour == 'legacy' for f, flavour, _table in snapshots):
            continue
        if not legacy_nat_exists(proc_read, family):
            continue        # not made: it holds nothing
        names = chains(family)
        if not names or chain not in names:
            continue
        tool = 'iptables-legacy' if family == 4 else 'ip6tables-legacy'
        result['only_ours'] = False
        line = ('%s: our chain %s%s, and %s-save is not installed, so its rules were not audited: run '
                'ipmasq.agent.masq_chain, which fails naming the commands that remove it, or install the '
                'iptables-legacy tools and audit again.'
                % (FAMILY_NAMES[family].replace('ip', 'IP'), chain, LEGACY_NOTE, tool))
        result['notes'].append(line)
        result['summary'] = '%s; our chain is also in the IPv%d legacy nat table, which was not audited.' % (
            result['summary'].rstrip('.'), family)
