# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Which backend holds the policy on a node, and the switch between them.

``backend``: ``iptables`` (``iptables.py``: the chain and its POSTROUTING
jump), ``nftables`` (``nftables.py``: the table ``inet <chain in lower
case>``) or ``auto``, which never moves a node by itself:

1. a node with our iptables chain (IPv4 or IPv6) stays on iptables;
2. else a node with our nftables table stays on nftables;
3. else (a new node): iptables where ``iptables-save`` and
   ``iptables-restore`` are installed, nftables where only ``nft`` is.

The policy lives in one backend only.  Every run looks for ours in the
backend it does not write to, and removes what it finds in the same run,
under the same lock: the new policy is written first, then the old one
removed, and when a step of a switch fails the steps already written are
undone, so that a node is never left with neither policy, nor with both.
Looking costs next to nothing: the kernel is asked over nfnetlink whether
our table (from an iptables run) or iptables-nft's chain of ours (from an
nftables run) exists (``nfnetlink.py``), /proc says whether a legacy nat
table exists at all, and a tool runs only when something is there.
``state=absent`` removes ours from both.

iptables itself comes in two flavours, each with nat tables of its own in
the kernel: legacy (x_tables) and iptables-nft (nf_tables).  The tools on
PATH write to one; every run also looks for ours in the other one (a legacy
nat table that /proc lists, iptables-nft's chain that the kernel holds),
reads it with that flavour's own tools (``iptables-legacy-save``,
``iptables-nft-save``) and removes it in the same run.  Where those tools are
not installed, a chain of ours the kernel holds there (``xtables_kernel.py``
asks it, for legacy) is an error that says where it is and how to remove it.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ipmasq.agent.plugins.module_utils._core import drift as rule_drift
from ansible_collections.ipmasq.agent.plugins.module_utils._core import nfnetlink, xtables_kernel
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables import (
    PROC_TABLES,
    TOOLS,
    IptablesBackend,
    jump_spec,
    diff_text as ipt_diff_text,
    sub_declarations,
    read_proc,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables import (
    NftTools,
    delete_commands as nft_delete_commands,
    missing_nft,
    plan_absent as nft_plan_absent,
    plan_present as nft_plan_present,
    table_label,
    table_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import FAMILIES, validate_chain_name
from ansible_collections.ipmasq.agent.plugins.module_utils._core.sync import Plan, Step

BACKENDS = ('auto', 'iptables', 'nftables')
# The iptables flavours (as iptables-save names them) and their own tools' prefix.
FLAVOURS = (('legacy', 'iptables-legacy'), ('nf_tables', 'iptables-nft'))
FLAVOUR_TOOLS = dict(FLAVOURS)
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


def _tool(flavour, family, which=''):
    """A flavour's tool name: ``iptables-legacy``, ``ip6tables-nft-save``, ..."""
    base = TOOLS[family][0]
    return '%s%s%s' % (base, FLAVOUR_TOOLS[flavour][len('iptables'):], which)


def held_message(chain, held):
    """The error for chains of ours the kernel holds in an iptables flavour
    whose tools are not installed: ``held`` lists ``(flavour, family)``."""
    parts = []
    for flavour, family in held:
        ipt = _tool(flavour, family)
        where = ('the iptables-legacy nat table' if flavour == 'legacy'
                 else "iptables-nft's nat table (nf_tables %s nat)" % NFT_FAMILIES[family])
        parts.append('%s is in %s (IPv%d), and %s and %s, which would remove it, are not installed. Install them and '
                     'run again, or remove it yourself: %s -t nat -D POSTROUTING %s (each POSTROUTING jump to it, as '
                     '%s -t nat lists them), then %s -t nat -F %s and %s -t nat -X %s.'
                     % (chain, where, family, _tool(flavour, family, '-save'), _tool(flavour, family, '-restore'),
                        ipt, jump_spec(chain), _tool(flavour, family, '-save'), ipt, chain, ipt, chain))
    return ('Our chain is in an iptables flavour the tools on PATH do not write to, so the node would run our policy '
            'there too: %s Nothing was changed.' % ' '.join(parts))


def check_backend(choice):
    if choice not in BACKENDS:
        raise MasqError("backend: %r is not one of 'auto', 'iptables', 'nftables'." % (choice,))
    return choice


class Reading:
    """What one run read of both backends, and what it chose."""

    def __init__(self, chain):
        self.chain = chain
        self.name = table_name(chain)
        self.selected = None
        self.reason = None
        self.ipt = None             # iptables.Reading, once read
        self.ipt_note = None        # why iptables was not read
        self.nft_read = False
        self.nft_table = None       # nft_json.NftTable of ours, when it exists
        self.nft_note = None
        self.nft_plan = None        # nftables.TablePlan, filled by plan()
        # Ours in the other iptables flavour: (flavour, IptablesBackend of its tools, iptables.Reading).
        self.elsewhere = []
        self.elsewhere_notes = []   # where it could not be told

    def select(self, backend, reason):
        self.selected, self.reason = backend, reason


class Backends:
    """The policy in the backend ``choice`` picks; ``sync.sync`` runs its
    read -> plan -> write under the writers' lock.  ``probe`` answers
    whether nf_tables holds a table or chain (``nfnetlink.exist``)."""

    def __init__(self, run, find, choice='auto', proc_read=None, probe=None):
        self.choice = check_backend(choice)
        self._run = run
        self._find = find
        self._iptables = None
        self.nft = NftTools(run, find)
        self.proc_read = proc_read or read_proc
        self.probe = probe or nfnetlink.exist

    @property
    def iptables(self):
        """The iptables backend, its tools looked up when first needed (an
        nftables run that finds no chain of ours never needs them)."""
        if self._iptables is None:
            self._iptables = IptablesBackend(self._run, self._find)
        return self._iptables

    # -- reading -----------------------------------------------------------

    def _ipt_available(self):
        return self.iptables.tools[4].available

    def _read_ipt(self, reading, policy):
        reading.ipt = self.iptables.read(policy, reading.chain)

    def _read_nft(self, reading):
        reading.nft_table = self.nft.listing(reading.name)
        reading.nft_read = True

    def read(self, policy, chain=None):
        chain = policy.chain if policy is not None else validate_chain_name(chain)
        reading = Reading(chain)
        if self.choice == 'nftables' and policy is not None:
            reading.select('nftables', 'asked for (backend=nftables)')
            if not self.nft.available:
                raise MasqError(missing_nft() + ' Nothing was changed.')
            self._read_nft(reading)
            if self._look_for_chain(reading):
                self._look_elsewhere(reading)
            return reading
        if self.choice == 'iptables' or policy is None or self._ipt_available():
            if policy is not None or self._ipt_available():
                self._read_ipt(reading, policy)
            else:
                reading.ipt_note = 'iptables-save/iptables-restore not found: no iptables chain to remove.'
        if policy is None:
            self._look_for_table(reading)           # state=absent: ours goes from both backends
        elif self.choice == 'iptables':
            reading.select('iptables', 'asked for (backend=iptables)')
            self._look_for_table(reading)
        else:
            self._auto(reading)
        self._look_elsewhere(reading)
        return reading

    def _look_for_table(self, reading):
        """Our nftables table, listed when the kernel has it (or cannot say)."""
        if not self.nft.available:
            reading.nft_note = 'nft not found: no nftables table to remove.'
            return
        (found,) = self.probe([('table', 'inet', reading.name)])
        if found is False:
            reading.nft_note = 'no %s (asked the kernel): nft not run.' % table_label(reading.name)
            return
        self._read_nft(reading)

    def _look_for_chain(self, reading):
        """nftables chosen: whether iptables holds a chain of ours too.
        iptables-nft's chains are nf_tables chains (the kernel is asked);
        a legacy chain can only be in a legacy nat table that /proc lists.
        False when neither can hold it."""
        found = self.probe([('chain', family, 'nat', reading.chain) for family in ('ip', 'ip6')])
        legacy = [f for f in FAMILIES if 'nat' in self.proc_read(PROC_TABLES[f])]
        if not (any(answer is not False for answer in found) or legacy):
            reading.ipt_note = ('no chain %s in any iptables nat table (asked the kernel; no legacy nat table is '
                                'loaded): iptables not read.' % reading.chain)
            return False
        if not self._ipt_available():
            held = self._chain_in_kernel(reading, found)
            if held:
                raise MasqError('backend=nftables: the kernel still holds our iptables chain %s (%s, written with '
                                'iptables-nft), and iptables-restore, which would remove it, is not installed: the '
                                'policy would be in both backends. Install iptables for this run (it moves the node '
                                'and removes the chain), or delete the chain and its POSTROUTING jump yourself '
                                '(nft list table ip nat). Nothing was changed.' % (reading.chain, held))
            reading.ipt_note = 'iptables-save/iptables-restore not found: no iptables chain to remove.'
        else:
            self._read_ipt(reading, None)
        return True

    def _chain_in_kernel(self, reading, found=None):
        """Where nf_tables holds our chain (iptables-nft's ip nat / ip6 nat), as text; '' when nowhere."""
        if found is None:
            found = self.probe([('chain', family, 'nat', reading.chain) for family in ('ip', 'ip6')])
        return ', '.join('%s nat' % family for family, answer in zip(('ip', 'ip6'), found) if answer)

    def _flavour_read(self, reading):
        """The flavour of the iptables tools on PATH, from what they printed
        (None: not read)."""
        if reading.ipt is not None:
            for _family, table in sorted(reading.ipt.tables.items()):
                if table.backend:
                    return table.backend
        return None

    def _path_flavour(self):
        """The flavour of the iptables tools on PATH, from ``iptables
        --version`` ('' when there is none, or it cannot say)."""
        tools = self.iptables.tools[4]
        if not tools.iptables:
            return ''
        argv = [tools.iptables, '--version']
        tools.commands.append(' '.join(argv))
        rc, out, _err = self._run(argv)
        if rc != 0:
            return ''
        return 'nf_tables' if 'nf_tables' in out else 'legacy'

    def _maybe_held(self, chain, flavour):
        """The families whose nat table of ``flavour`` may hold ``chain``:
        family -> True (the kernel says so) or None (a legacy nat table
        exists: only reading it tells)."""
        if flavour == 'legacy':
            return dict((f, None) for f in FAMILIES if 'nat' in self.proc_read(PROC_TABLES[f]))
        found = self.probe([('chain', NFT_FAMILIES[f], 'nat', chain) for f in FAMILIES])
        return dict((f, answer) for f, answer in zip(FAMILIES, found) if answer is not False)

    def _look_elsewhere(self, reading):
        """Ours in the iptables flavour whose tools are not the ones on PATH
        (either, when no iptables is on PATH): read with that flavour's own
        tools, to be removed in the same run.  Without them, a chain of ours
        the kernel holds there is an error naming where it is and how to
        remove it; where the kernel cannot say, a warning."""
        path = self._flavour_read(reading)
        held = []
        for flavour, _tools in FLAVOURS:
            if flavour == path:
                continue
            maybe = self._maybe_held(reading.chain, flavour)
            if not maybe:
                continue
            if path is None:
                path = self._path_flavour()
                if flavour == path:
                    continue
            other = IptablesBackend(self._run, flavoured_find(self._find, flavour, maybe))
            for family in sorted(maybe):
                if other.tools[family].available:
                    continue
                known = maybe[family]
                if flavour == 'legacy':
                    names = xtables_kernel.chains(family)
                    known = None if names is None else reading.chain in names
                if known:
                    held.append((flavour, family))
                elif known is None:
                    reading.elsewhere_notes.append(
                        'an %s nat table (IPv%d) exists and %s is not installed: whether it holds chain %s could not '
                        'be told.' % (FLAVOUR_TOOLS[flavour], family, _tool(flavour, family, '-save'), reading.chain))
            if held or not any(other.tools[f].available for f in maybe):
                continue
            ipt = other.read(None)
            for family, table in list(ipt.tables.items()):
                if table.backend != flavour:
                    # Not that flavour after all (the tools on PATH again): never remove what this run writes.
                    del ipt.tables[family]
            if any(reading.chain in t.chains or t.jumps_to(reading.chain, 'POSTROUTING') for t in ipt.tables.values()):
                reading.elsewhere.append((flavour, other, ipt))
        if held:
            raise MasqError(held_message(reading.chain, held))

    def _elsewhere_steps(self, reading, adopt, undo):
        """The removal of ours from the other iptables flavour, per family."""
        steps = []
        for flavour, other, ipt in reading.elsewhere:
            for step in other.plan(ipt, None, reading.chain, adopt, strict=False, undo=undo).steps:
                step.label = '%s (%s)' % (step.label, _tool(flavour, int(step.label[len('IPv'):])))
                step.kinds = ['other_backend'] * len(step.actions)
                steps.append(step)
        return steps

    def _auto(self, reading):
        if reading.ipt is not None:
            holding = [f for f, t in sorted(reading.ipt.tables.items()) if reading.chain in t.chains]
            if holding:
                reading.select('iptables', 'auto: the node has our iptables chain %s (%s)'
                               % (reading.chain, ', '.join('IPv%d' % f for f in holding)))
                self._look_for_table(reading)
                return
        if self.nft.available:
            try:
                self._look_for_table(reading)
            except MasqError as e:
                if reading.ipt is None:
                    raise
                reading.nft_note = 'nft could not list the ruleset (%s).' % e.msg.rstrip('.')
            if reading.nft_table is not None:
                reading.select('nftables', 'auto: the node has our nftables %s' % table_label(reading.name))
                return
        if reading.ipt is not None:
            reading.select('iptables', 'auto: a node with neither policy yet, where iptables is installed')
        elif self.nft.available:
            held = self._chain_in_kernel(reading)
            if held:
                raise MasqError('auto: the kernel holds our iptables chain %s (%s, written with iptables-nft), but '
                                'iptables-save and iptables-restore are not installed, so this run can neither keep '
                                'the node on iptables nor remove the chain. Install iptables: the node then stays on '
                                'iptables, and backend=nftables moves it. Nothing was changed.' % (reading.chain, held))
            reading.select('nftables', 'auto: a node with neither policy yet, where only nft is installed')
            if not reading.nft_read:
                self._read_nft(reading)
        else:
            raise MasqError('Neither iptables (iptables-save and iptables-restore) nor nft was found on the node; '
                            'install iptables or nftables. Nothing was changed.')

    # -- planning ----------------------------------------------------------

    def plan(self, reading, policy, chain=None, adopt=False):
        if policy is None:
            return self._plan_absent(reading, adopt)
        if reading.selected == 'iptables':
            return self._plan_iptables(reading, policy, adopt)
        return self._plan_nftables(reading, policy, adopt)

    def _nft_step(self, plan, undo=None, kinds=None):
        self.nft.commands.append(' '.join(self.nft.argv()) + '  # the transaction')
        return Step('nftables', plan.actions, lambda commands=plan.commands: self.nft.load(commands), undo,
                    plan.kinds if kinds is None else kinds)

    def _plan_absent(self, reading, adopt):
        steps = []
        if reading.ipt is not None:
            steps.extend(self.iptables.plan(reading.ipt, None, reading.chain, adopt).steps)
        if reading.nft_read:
            reading.nft_plan = nft_plan_absent(reading.nft_table, reading.name, adopt)
            if reading.nft_plan.changed:
                steps.append(self._nft_step(reading.nft_plan))
        steps.extend(self._elsewhere_steps(reading, adopt, undo=False))
        return Plan(steps)

    def _plan_iptables(self, reading, policy, adopt):
        ipt = self.iptables.plan(reading.ipt, policy, reading.chain, adopt, undo=True)
        steps = list(ipt.steps)
        switch = False
        if reading.nft_table is not None:
            reading.nft_plan = nft_plan_absent(reading.nft_table, reading.name, adopt, strict=False)
            if reading.nft_plan.changed:
                # The chain first (each family undone if a later step fails), then the table.
                steps.append(self._nft_step(reading.nft_plan, kinds=['other_backend'] * len(reading.nft_plan.actions)))
                switch = ipt.changed
        others = self._elsewhere_steps(reading, adopt, undo=ipt.changed)
        if others:
            # Ours in the other iptables flavour: removed after the write, which is undone if that fails.
            steps.extend(others)
            switch = switch or ipt.changed
        if not switch:
            # Not a switch: a family written stays written when a later one fails.
            for step in ipt.steps:
                step.undo = None
        return Plan(steps)

    def _plan_nftables(self, reading, policy, adopt):
        reading.nft_plan = nft_plan_present(reading.nft_table, policy, adopt)
        writes = reading.nft_plan.changed
        steps = []
        if writes:
            steps.append(self._nft_step(reading.nft_plan,
                                        undo=lambda: self.nft.load(nft_delete_commands(reading.name))))
        if reading.ipt is not None:
            removal = self.iptables.plan(reading.ipt, None, reading.chain, adopt, strict=False, undo=writes)
            for step in removal.steps:
                step.kinds = ['other_backend'] * len(step.actions)
            steps.extend(removal.steps)
        steps.extend(self._elsewhere_steps(reading, adopt, undo=writes))
        return Plan(steps)

    # -- the result --------------------------------------------------------

    def result(self, reading, plan, policy, state):
        """The ``masq_chain`` module's result."""
        if reading.ipt is not None:
            ipt_plan = Plan([s for s in plan.steps if s.label != 'nftables'])
            result = self.iptables.result(reading.ipt, ipt_plan, policy, state)
        else:
            result = {'chain': reading.chain, 'backend': None, 'iptables_version': None, 'commands': [],
                      'warnings': list(policy.warnings) if policy is not None else []}
            for family in FAMILIES:
                result['ipv%d' % family] = {'managed': False, 'present': False, 'changed': False,
                                            'note': reading.ipt_note}
        result.update(changed=plan.changed, state=state, actions=plan.actions, chain=reading.chain,
                      selected_backend=reading.selected, backend_reason=reading.reason, drift_kinds=plan.kinds)
        result['commands'] = result['commands'] + self.nft.commands
        result['other_iptables'] = self._elsewhere_result(reading, result)
        result['nft_version'] = self.nft.version
        nft = reading.nft_plan
        out = {'table': table_label(reading.name), 'managed': reading.selected == 'nftables',
               'read': reading.nft_read, 'exists_before': reading.nft_table is not None,
               'changed': bool(nft is not None and nft.changed), 'before': None, 'after': None,
               'transaction': None, 'drift': None}
        if nft is not None:
            if nft.changed:
                # The listings only when they differ: a table in sync is the
                # policy's, and 20,000 set elements are not sent back every run.
                out['before'], out['after'] = nft.before, nft.after
                out['transaction'] = self.nft.batch(nft.commands)
                if nft.managed and nft.desired is not None:
                    # Which rules and set elements the rewrite puts back or takes out.
                    out['drift'] = rule_drift.nft_table(nft.table, nft.desired)
            if nft.note:
                out['note'] = nft.note
                result['warnings'].append('nftables: %s' % nft.note)
        elif reading.nft_note:
            out['note'] = reading.nft_note
        result['nftables'] = out
        return result

    def _elsewhere_result(self, reading, result):
        """Ours in the other iptables flavour, per family read there (and its
        commands and notes added to ``result``)."""
        out = []
        for flavour, other, ipt in reading.elsewhere:
            for family, fam in sorted(ipt.plans.items()):
                entry = {'tools': _tool(flavour, family), 'family': family, 'changed': fam.changed,
                         'chain_exists': fam.chain_exists, 'rules': fam.rules, 'jumps': [r.line for r in fam.jumps]}
                if fam.note:
                    entry['note'] = fam.note
                    result['warnings'].append('%s: %s' % (_tool(flavour, family), fam.note))
                out.append(entry)
            for family in sorted(other.tools):
                result['commands'].extend(other.tools[family].commands)
        result['warnings'].extend(reading.elsewhere_notes)
        return out


def diff_text(result, which):
    """Text for diff mode: the iptables chain and jumps per family, then our
    nftables table as ``nft list table`` shows it, before or after."""
    text = ipt_diff_text(result, which)
    for entry in result.get('other_iptables') or []:
        # Ours in the other iptables flavour: there before, gone after when this run removes it.
        if not (entry.get('chain_exists') or entry.get('jumps')):
            continue
        text += '# %s nat (IPv%d), the iptables flavour not on PATH\n' % (entry['tools'], entry['family'])
        if which == 'before' or not entry.get('changed'):
            lines = list(entry.get('jumps') or [])
            if entry.get('chain_exists'):
                lines.append(':%s - [0:0]' % result['chain'])
            lines.extend(sub_declarations(entry.get('rules') or [], result['chain']))
            lines.extend(entry.get('rules') or [])
            text += ''.join(line + '\n' for line in lines)
    nft = result.get('nftables') or {}
    body = nft.get(which)
    if which == 'after' and not nft.get('managed'):
        body = None
    if nft.get('read') or body:
        text += '# nft list %s\n%s' % (nft.get('table'), body or '')
    return text
