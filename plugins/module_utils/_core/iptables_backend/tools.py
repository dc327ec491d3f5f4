# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The node's iptables tools, per family: ``iptables-save -t nat`` read
(``save.py`` parses it) and ``iptables-restore --noflush`` written,
argv lists through the injected ``run``, never a shell.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import parse_save, parse_version
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import FAMILIES

# The backend that writes with the tools on PATH (``backend_iptables.IptablesOnPath``):
# the home of ours in every iptables nat table the audit reads.
ON_PATH = 'iptables'
# The iptables flavours (as iptables-save names them) and their own tools' prefix.
FLAVOURS = (('legacy', 'iptables-legacy'), ('nf_tables', 'iptables-nft'))
FLAVOUR_TOOLS = dict(FLAVOURS)
RESTORE_WAIT_SECONDS = 30
# The legacy (x_tables) tables the kernel has made, per family: a legacy nat
# table holds rules only when it is listed there (reading it would make it).
PROC_TABLES = {4: '/proc/net/ip_tables_names', 6: '/proc/net/ip6_tables_names'}
TOOLS = {
    4: ('iptables', 'iptables-save', 'iptables-restore'),
    6: ('ip6tables', 'ip6tables-save', 'ip6tables-restore'),
}


def legacy_nat_exists(proc_read, family):
    """Whether the kernel has made the legacy (x_tables) nat table of
    ``family``: /proc lists it.  One that does not exist holds no rules, and
    reading it (``iptables-legacy-save``) would make it."""
    return 'nat' in proc_read(PROC_TABLES[family])


def flavour_of(text):
    """The iptables flavour an ``iptables --version`` text names: ``'nf_tables'`` or ``'legacy'``."""
    return 'nf_tables' if 'nf_tables' in text else 'legacy'


def payload(lines):
    """The ``iptables-restore --noflush`` input for restore lines of the nat table."""
    return '*nat\n' + '\n'.join(lines) + '\nCOMMIT\n'


def missing_tools(family):
    return ('%s and %s were not found on the node; install the iptables package.' % TOOLS[family][1:])


class Tools:
    """The node's iptables tools for one family.

    ``run(argv, data=None) -> (rc, stdout, stderr)`` runs an argv list (no
    shell); ``find(name) -> path or None`` finds a tool.  ``commands`` lists
    what was (or, for a restore in check mode, would be) run.
    """

    def __init__(self, family, run, find):
        self.family = family
        self._run = run
        self.iptables, self.save_bin, self.restore_bin = (find(n) for n in TOOLS[family])
        self.available = bool(self.save_bin and self.restore_bin)
        self.commands = []

    def _cmd(self, argv, data=None):
        rc, out, err = self._run(argv, data)
        if rc != 0:
            raise MasqError('%s failed (rc=%d): %s' % (' '.join(argv), rc, (err or out).strip() or
                                                       'no message (the tool crashed?)'),
                            cmd=' '.join(argv), rc=rc, stdout=out, stderr=err)
        return out

    def save_argv(self):
        return [self.save_bin, '-t', 'nat']

    def save_text(self, record=True):
        """The raw ``iptables-save -t nat`` output."""
        argv = self.save_argv()
        if record:
            self.commands.append(' '.join(argv))
        return self._cmd(argv)

    def version(self, strict=True):
        """``(version, flavour)`` of these tools from ``iptables --version``,
        which touches no table (saving a legacy nat table that does not exist
        makes it).  When the tool fails: MasqError (``strict``), else ``(None,
        None)``; ``(None, None)`` too where there is no ``iptables``."""
        if not self.iptables:
            return None, None
        argv = [self.iptables, '--version']
        self.commands.append(' '.join(argv))
        if strict:
            text = self._cmd(argv)
        else:
            rc, out, err = self._run(argv)
            if rc != 0:
                return None, None
            text = out or err or ''
        return parse_version(text), flavour_of(text)

    def read(self, record=True, ask=True):
        """The nat table, its backend and version filled in (``ask``: an
        empty legacy nat table prints no header, so the tool itself is asked;
        else its ``backend`` stays None)."""
        table = parse_save(self.save_text(record))
        if ask and table.backend is None and self.iptables:
            table.version, table.backend = self.version()
        return table

    def restore_argv(self):
        return [self.restore_bin, '--wait=%d' % RESTORE_WAIT_SECONDS, '--noflush']

    def restore(self, lines):
        self._cmd(self.restore_argv(), data=payload(lines))


def tools_for(run, find, families=FAMILIES):
    return dict((family, Tools(family, run, find)) for family in families)
