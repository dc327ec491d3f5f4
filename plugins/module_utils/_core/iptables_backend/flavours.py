# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The iptables flavours as backends of their own: ``iptables-legacy`` and
``iptables-nft`` (``backend.Backend``; they do not write, ``writes`` False).

iptables comes in two flavours, each with nat tables of its own in the
kernel: legacy (x_tables) and iptables-nft (nf_tables).  The tools on PATH
write to one (``backend.py``); each flavour backend looks for ours
in its own flavour when that is not the one on PATH (a legacy nat table that
/proc lists, iptables-nft's chain that the kernel holds), reads it with that
flavour's own tools (``iptables-legacy-save``, ``iptables-nft-save``) and
removes it in the same run.  Where those tools are not installed, a chain of
ours the kernel holds there (``xtables_kernel.py`` asks it, for legacy) is
an error that says where it is and how to remove it.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import Backend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.backend import IptablesShared, chains_of_ours
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.chain import IptablesBackend, ours_elsewhere, others_before
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.rules import jump_spec, others_text, sub_declarations
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.tools import FLAVOUR_TOOLS, TOOLS, Tools, legacy_nat_exists
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import FAMILIES

NFT_FAMILIES = {4: 'ip', 6: 'ip6'}


def flavoured_find(find, flavour, families):
    """``find`` for one iptables flavour's own tools (``iptables-save`` ->
    ``iptables-legacy-save``), and only for ``families`` (a legacy nat table
    that does not exist is made by reading it)."""
    suffix = FLAVOUR_TOOLS[flavour].split('-', 1)[1]

    def found(name):
        if (6 if name.startswith('ip6') else 4) not in families:
            return None
        base, dash, rest = name.partition('-')
        return find('%s-%s%s%s' % (base, suffix, dash, rest))
    return found


def tool_name(flavour, family, which=''):
    """A flavour's tool name: ``iptables-legacy``, ``ip6tables-nft-save``, ..."""
    base = TOOLS[family][0]
    return '%s%s%s' % (base, FLAVOUR_TOOLS[flavour][len('iptables'):], which)


def held_message(chain, held):
    """The error for chains of ours the kernel holds in an iptables flavour
    whose tools are not installed: ``held`` lists ``(flavour, family)``."""
    parts = []
    for flavour, family in held:
        ipt = tool_name(flavour, family)
        where = ('the iptables-legacy nat table' if flavour == 'legacy'
                 else "iptables-nft's nat table (nf_tables %s nat)" % NFT_FAMILIES[family])
        parts.append('%s is in %s (IPv%d), and %s and %s, which would remove it, are not installed. Install them and '
                     'run again, or remove it yourself: %s -t nat -D POSTROUTING %s (each POSTROUTING jump to it, as '
                     '%s -t nat lists them), then %s -t nat -F %s and %s -t nat -X %s.'
                     % (chain, where, family, tool_name(flavour, family, '-save'),
                        tool_name(flavour, family, '-restore'), ipt, jump_spec(chain),
                        tool_name(flavour, family, '-save'), ipt, chain, ipt, chain))
    return ('Our chain is in an iptables flavour the tools on PATH do not write to, so the node would run our policy '
            'there too: %s Nothing was changed.' % ' '.join(parts))


class FlavourState:
    """What one flavour backend found in one run."""

    def __init__(self):
        self.other = None       # IptablesBackend of the flavour's own tools, when ours is there
        self.ipt = None         # its iptables.IptablesReading
        self.notes = []         # where it could not be told


class IptablesFlavour(Backend):
    """Ours in one iptables flavour, when the tools on PATH are the other one."""

    writes = False
    flavour = None
    diff_rank = 1
    audit_listings = ((r'ip6?tables-(legacy|nft)-save', ('-t', 'nat')), (r'ip6?tables-(legacy|nft)', ('--version',)))

    def available(self):
        return True

    def state(self, reading):
        return reading.of.setdefault(self.name, FlavourState())

    def holds_ours(self, reading):
        return self.state(reading).ipt is not None

    def ours_text(self, reading):
        return 'our chain %s in %s' % (reading.chain, self.name)

    def read(self, reading, policy):
        raise MasqError('%s: the policy is written with the iptables tools on PATH.' % self.name)

    def _maybe_held(self, chain):
        """The families whose nat table of this flavour may hold ``chain``:
        family -> True (the kernel says so) or None (a legacy nat table
        exists, or a rule of iptables-nft's carries our comment: only
        reading it tells)."""
        if self.flavour == 'legacy':
            return dict((f, None) for f in FAMILIES if legacy_nat_exists(self.node.proc_read, f))
        found, marked = chains_of_ours(self.node, chain)
        # A rule carrying our comment, without the chain of this name: ours under another name, or not ours
        # (only reading tells).
        answers = [named if named is not False else (None if ours is not False else False)
                   for named, ours in zip(found, marked)]
        return dict((f, answer) for f, answer in zip(FAMILIES, answers) if answer is not False)

    def look(self, reading, why):
        """Read with this flavour's own tools, to be removed in the same run.
        Without them, a chain of ours the kernel holds there is an error
        naming where it is and how to remove it (``after_look``); where the
        kernel cannot say, a warning."""
        shared = reading.share(IptablesShared)
        if shared.nowhere:
            return      # the iptables backend asked: no chain of ours in any iptables nat table
        st = self.state(reading)
        held = shared.held
        path = shared.path_flavour
        if self.flavour == path:
            return
        maybe = self._maybe_held(reading.chain)
        if not maybe:
            return
        if path is None and self.flavour == shared.known_path_flavour(self.node):
            return
        other = IptablesBackend(self.node.run, flavoured_find(self.node.find, self.flavour, maybe))
        for family in sorted(maybe):
            if other.tools[family].available:
                continue
            known = maybe[family]
            if self.flavour == 'legacy':
                # Start-up cost: the kernel's xtables are asked only where legacy's tools are missing.
                from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import (  # pylint: disable=import-outside-toplevel
                    xtables_kernel,
                )

                names = xtables_kernel.chains(family)
                known = None if names is None else reading.chain in names
            if known:
                held.append((self.flavour, family))
            elif known is None:
                st.notes.append(
                    'an %s nat table (IPv%d) exists and %s is not installed: whether it holds chain %s could not '
                    'be told.' % (self.name, family, tool_name(self.flavour, family, '-save'), reading.chain))
        if held or not any(other.tools[f].available for f in maybe):
            return
        ipt = other.read(None)
        for family, table in list(ipt.tables.items()):
            if table.backend != self.flavour:
                # Not this flavour after all (the tools on PATH again): never remove what this run writes.
                del ipt.tables[family]
        if any(reading.chain in t.chains or t.jumps_to(reading.chain, 'POSTROUTING') or ours_elsewhere(t, reading.chain)
               for t in ipt.tables.values()):
            st.other, st.ipt = other, ipt

    def after_look(self, reading):
        held = reading.share(IptablesShared).held
        if held:
            raise MasqError(held_message(reading.chain, held))

    def plan_present(self, reading, policy, adopt):
        raise MasqError('%s: the policy is written with the iptables tools on PATH.' % self.name)

    def plan_absent(self, reading, adopt, strict, undo):
        """Never strict: a chain of that name there that is not ours is left alone."""
        st = self.state(reading)
        if st.ipt is None:
            return []
        steps = []
        for step in st.other.plan(st.ipt, None, reading.chain, adopt, strict=False, undo=undo).steps:
            step.label = '%s (%s)' % (step.label, tool_name(self.flavour, int(step.label[len('IPv'):])))
            step.kinds = ['other_backend'] * len(step.actions)
            steps.append(step)
        return steps

    def audit_read(self, view, family):
        """The nat table of ``family`` as this flavour's own tools show it."""
        if family is None:
            return []
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.audit import read_nat  # the audit's reader: loaded by an audit only
        tools = Tools(family, self.node.run, flavoured_find(self.node.find, self.flavour, (family,)))
        return read_nat(view, self.name, tools, family, self.flavour)

    def report(self, reading, plan, policy, state, result):
        """Ours found here, per family read (``other_iptables``)."""
        st = self.state(reading)
        out = result.setdefault('other_iptables', [])
        if st.ipt is not None:
            for family, fam in sorted(st.ipt.plans.items()):
                entry = {'tools': tool_name(self.flavour, family), 'family': family, 'changed': fam.changed,
                         'chain_exists': fam.chain_exists, 'rules': fam.rules, 'jumps': [r.line for r in fam.jumps]}
                if fam.others:
                    entry['others'] = others_before(fam)
                if fam.note:
                    entry['note'] = fam.note
                    result['warnings'].append('%s: %s' % (tool_name(self.flavour, family), fam.note))
                out.append(entry)
            for family in sorted(st.other.tools):
                result['commands'].extend(st.other.tools[family].commands)
        result['warnings'].extend(st.notes)
        return []

    @classmethod
    def _entries(cls, result):
        """This flavour's entries of ``other_iptables``."""
        return [entry for entry in result.get('other_iptables') or []
                if entry.get('family') in FAMILIES and entry.get('tools') == tool_name(cls.flavour, entry['family'])]

    @classmethod
    def diff_text(cls, result, which):
        """Ours in this flavour: there before, gone after when this run removes it."""
        text = ''
        for entry in cls._entries(result):
            if not (entry.get('chain_exists') or entry.get('jumps') or entry.get('others')):
                continue
            text += '# %s nat (IPv%d), the iptables flavour not on PATH\n' % (entry['tools'], entry['family'])
            if which == 'before' or not entry.get('changed'):
                lines = list(entry.get('jumps') or [])
                if entry.get('chain_exists'):
                    lines.append(':%s - [0:0]' % result['chain'])
                lines.extend(sub_declarations(entry.get('rules') or [], result['chain']))
                lines.extend(entry.get('rules') or [])
                lines.extend(others_text(entry.get('others')))
                text += ''.join(line + '\n' for line in lines)
        return text

    @classmethod
    def msg_parts(cls, result, check_mode, present, elsewhere):
        """``IPv4 ours in iptables-legacy removed``, after every backend's own."""
        # Start-up cost: the msg's words are loaded only by a module run (never by the resync).
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.result_words import did  # pylint: disable=import-outside-toplevel

        later = [did(check_mode, 'IPv%s ours in %s' % (entry.get('family'), entry.get('tools')), 'removed', 'remove')
                 for entry in cls._entries(result) if entry.get('changed')]
        return [], [], later


class IptablesLegacy(IptablesFlavour):
    name = 'iptables-legacy'
    flavour = 'legacy'
    audit_rank = 2


class IptablesNft(IptablesFlavour):
    name = 'iptables-nft'
    flavour = 'nf_tables'
    audit_rank = 1
