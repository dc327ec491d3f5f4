# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``iptables`` backend (``backend.Backend``): the chain and its
POSTROUTING jump, written with the iptables tools on PATH (``iptables.py``
holds the rules; whichever flavour those tools are, ``backend_flavours.py``
looks in the other one).

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.backend import Backend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables import IptablesBackend, ours_elsewhere
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_tools import legacy_nat_exists
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import FAMILIES

NOT_FOUND = 'iptables-save/iptables-restore not found: no iptables chain to remove.'


class IptablesState:
    """What the iptables backend read in one run."""

    def __init__(self):
        self.ipt = None         # iptables.IptablesReading, once read
        self.note = None        # why iptables was not read


class IptablesOnPath(Backend):
    """The policy in iptables, with the tools on PATH."""

    name = 'iptables'
    installed_text = 'iptables is installed'
    audit_rank = 0
    audit_listings = ((r'ip6?tables-save', ('-t', 'nat')), (r'ip6?tables', ('--version',)))

    def __init__(self, node):
        Backend.__init__(self, node)
        self._iptables = None

    @property
    def iptables(self):
        """The tools, looked up when first needed (an nftables run that finds
        no chain of ours never needs them)."""
        if self._iptables is None:
            self._iptables = IptablesBackend(self.node.run, self.node.find)
        return self._iptables

    def available(self):
        return self.iptables.tools[4].available

    def state(self, reading):
        return reading.of.setdefault(self.name, IptablesState())

    def was_read(self, reading):
        return self.state(reading).ipt is not None

    def _read(self, reading, policy):
        self.state(reading).ipt = self.iptables.read(policy, reading.chain)

    def holds_ours(self, reading):
        return bool(self._holding(reading))

    def _holding(self, reading):
        ipt = self.state(reading).ipt
        if ipt is None:
            return []
        return [f for f, t in sorted(ipt.tables.items()) if reading.chain in t.chains or ours_elsewhere(t, reading.chain)]

    def ours_text(self, reading):
        ipt = self.state(reading).ipt
        names = []
        for family in self._holding(reading):
            table = ipt.tables[family]
            for name in ([reading.chain] if reading.chain in table.chains else []) + ours_elsewhere(table, reading.chain):
                if name not in names:
                    names.append(name)
        return 'our iptables chain %s (%s)' % (', '.join(names), ', '.join('IPv%d' % f for f in self._holding(reading)))

    def read(self, reading, policy):
        self._read(reading, policy)

    def candidate(self, reading, policy, tolerate):
        """auto: read where the tools are installed."""
        if self.available():
            self._read(reading, policy)

    def new_home(self, reading):
        """auto, a node with neither policy: whether the policy can go here."""
        return self.was_read(reading)

    def before_other_home(self, reading):
        """auto chose another backend for a new node, iptables unread: our chain
        the kernel holds (iptables-nft's) could be neither kept nor removed."""
        if self.was_read(reading):
            return
        held = self.chain_in_kernel(reading)
        if held:
            raise MasqError('auto: the kernel holds our iptables chain %s (%s, written with iptables-nft), but '
                            'iptables-save and iptables-restore are not installed, so this run can neither keep '
                            'the node on iptables nor remove the chain. Install iptables: the node then stays on '
                            'iptables, and backend=nftables moves it. Nothing was changed.' % (reading.chain, held))

    def look(self, reading, why):
        if why == 'absent':
            if self.available():
                self._read(reading, None)
            else:
                self.state(reading).note = NOT_FOUND
            return
        if self.was_read(reading):
            return
        if not self._look_for_chain(reading):
            reading.shared['iptables_nowhere'] = True

    def _look_for_chain(self, reading):
        """Another backend chosen: whether iptables holds a chain of ours too.
        iptables-nft's chains are nf_tables chains (the kernel is asked);
        a legacy chain can only be in a legacy nat table that /proc lists.
        False when neither can hold it."""
        found = self.node.probe([('chain', family, 'nat', reading.chain) for family in ('ip', 'ip6')])
        legacy = [f for f in FAMILIES if legacy_nat_exists(self.node.proc_read, f)]
        if not (any(answer is not False for answer in found) or legacy):
            self.state(reading).note = ('no chain %s in any iptables nat table (asked the kernel; no legacy nat table '
                                        'is loaded): iptables not read.' % reading.chain)
            return False
        if not self.available():
            held = self.chain_in_kernel(reading, found)
            if held:
                raise MasqError('backend=nftables: the kernel still holds our iptables chain %s (%s, written with '
                                'iptables-nft), and iptables-restore, which would remove it, is not installed: the '
                                'policy would be in both backends. Install iptables for this run (it moves the node '
                                'and removes the chain), or delete the chain and its POSTROUTING jump yourself '
                                '(nft list table ip nat). Nothing was changed.' % (reading.chain, held))
            self.state(reading).note = NOT_FOUND
        else:
            self._read(reading, None)
        return True

    def chain_in_kernel(self, reading, found=None):
        """Where nf_tables holds our chain (iptables-nft's ip nat / ip6 nat), as text; '' when nowhere."""
        if found is None:
            found = self.node.probe([('chain', family, 'nat', reading.chain) for family in ('ip', 'ip6')])
        return ', '.join('%s nat' % family for family, answer in zip(('ip', 'ip6'), found) if answer)

    def plan_present(self, reading, policy, adopt):
        return list(self.iptables.plan(self.state(reading).ipt, policy, reading.chain, adopt, undo=True).steps)

    def plan_absent(self, reading, adopt, strict, undo):
        ipt = self.state(reading).ipt
        if ipt is None:
            return []
        return list(self.iptables.plan(ipt, None, reading.chain, adopt, strict=strict, undo=undo).steps)

    @staticmethod
    def rules_in_place(result, policy):
        """The chain's rules and its jump, per managed family."""
        out = {}
        for family in FAMILIES:
            fam = result.get('ipv%d' % family) or {}
            if fam.get('managed'):
                out[family] = len(fam.get('rules') or []) + (1 if fam.get('jump') else 0)
        return out

    def audit_read(self, view, family):
        """The nat table of ``family`` as the tools on PATH show it (their flavour asked first)."""
        if family is None:
            return []
        from ansible_collections.ipmasq.agent.plugins.module_utils._audit.iptables import read_nat     # the audit's reader: loaded by an audit only
        return read_nat(view, self.name, self.iptables.tools[family], family, None)

    @classmethod
    def audit_words(cls, chain, advice):
        """Ours in the chain, and in both flavours' nat tables."""
        from ansible_collections.ipmasq.agent.plugins.module_utils._audit.iptables import words     # the audit's words: loaded by an audit only
        return words(chain, advice)

    def report(self, reading, plan, policy, state, result):
        st = self.state(reading)
        if st.ipt is not None:
            own = self.iptables.result(st.ipt, plan, policy, state)
            result['commands'].extend(own['commands'])
            result['warnings'].extend(own['warnings'][len(policy.warnings) if policy is not None else 0:])
            keys = dict((k, own[k]) for k in ('backend', 'iptables_version', 'ipv4', 'ipv6'))
        else:
            keys = {'backend': None, 'iptables_version': None}
            for family in FAMILIES:
                keys['ipv%d' % family] = {'managed': False, 'present': False, 'changed': False, 'note': st.note}
        result.update(keys)
        # 'backend' is the flavour of the iptables tools on PATH (kept for compatibility): the same, named clearly.
        result['iptables_flavour'] = keys['backend']
        return []
