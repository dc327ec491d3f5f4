# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``iptables`` backend (``backend.Backend``): the chain and its
POSTROUTING jump, written with the iptables tools on PATH (``chain.py``
holds the rules; whichever flavour those tools are, ``flavours.py``
looks in the other one).

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import Backend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.chain import IptablesBackend, ours_elsewhere
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.rules import diff_text
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.tools import ON_PATH, TOOLS, Tools, legacy_nat_exists
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import FAMILIES, OUR_COMMENT_PREFIX

NOT_FOUND = 'iptables-save/iptables-restore not found: no iptables chain to remove.'


def chains_of_ours(node, chain):
    """What the kernel says of ours in iptables-nft's nat tables (``ip nat``,
    ``ip6 nat``): per family, whether ``chain`` is there, and whether a rule
    there carries our comment (ours under any other chain name: a renamed
    chain's, which the chain's name alone does not find).  Each answer True,
    False or None (the kernel could not be asked)."""
    answers = node.probe([('chain', family, 'nat', chain) for family in ('ip', 'ip6')]
                         + [('carries', family, 'nat', OUR_COMMENT_PREFIX) for family in ('ip', 'ip6')])
    return list(answers[:2]), list(answers[2:])


class IptablesState:
    """What the iptables backend read in one run."""

    def __init__(self):
        self.ipt = None         # iptables.IptablesReading, once read
        self.note = None        # why iptables was not read


class IptablesShared:
    """What the iptables backends (the tools on PATH, ``IptablesOnPath``, and
    the flavours, ``flavours.py``) read together in one run; each
    reaches it with ``reading.share(IptablesShared)``."""

    def __init__(self):
        self.path_flavour = None    # the flavour of the tools on PATH, once known ('' when they cannot say)
        self.nowhere = False        # the kernel holds no chain of ours in any iptables nat table
        self.held = []              # (flavour, family): ours held in a flavour whose tools are not installed

    def known_path_flavour(self, node):
        """The flavour of the tools on PATH: from what they printed when
        read, else from ``iptables --version`` ('' when there is none, or it
        cannot say); asked once per run."""
        if self.path_flavour is None:
            self.path_flavour = Tools(4, node.run, node.find).version(strict=False)[1] or ''
        return self.path_flavour


class IptablesOnPath(Backend):
    """The policy in iptables, with the tools on PATH."""

    name = ON_PATH
    installed_text = 'iptables is installed'
    tools_text = 'iptables (iptables-save and iptables-restore)'
    audit_rank = 0
    tool = 'iptables-restore'
    tool_key = 'iptables'
    packages = (('RedHat', 9, 'iptables-nft'), ('', 0, 'iptables'))
    drift_kinds = (
        'chain_missing',        # our chain was not there (created, with its rules)
        'chain_rules',          # the chain's rules differed (rewritten)
        'jump_missing',         # no POSTROUTING jump to the chain (added)
        'jump_wrong',           # a jump to the chain of another form (replaced)
        'jump_duplicate',       # more than one jump (the others removed)
        'jump_position',        # jump_position first, and the jump was not first (moved)
        'chain_unwanted',       # our chain in a family the policy does not manage (removed)
    )
    metric_help = "iptables: the chain's rules and its POSTROUTING jump"
    result_keys = ('ipv4', 'ipv6')
    diff_rank = 0
    audit_listings = ((r'ip6?tables-save', ('-t', 'nat')), (r'ip6?tables', ('--version',)))
    audit_tool = 'iptables-save'
    match_part = 'nat'

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
        ipt = self.state(reading).ipt = self.iptables.read(policy, reading.chain)
        shared = reading.share(IptablesShared)
        for _family, table in sorted(ipt.tables.items()):
            if table.backend:
                shared.path_flavour = table.backend
                break

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
            reading.share(IptablesShared).nowhere = True

    def _look_for_chain(self, reading):
        """Another backend chosen: whether iptables holds a chain of ours too.
        iptables-nft's chains are nf_tables chains (the kernel is asked);
        a legacy chain can only be in a legacy nat table that /proc lists.
        False when neither can hold it."""
        found, marked = chains_of_ours(self.node, reading.chain)
        legacy = [f for f in FAMILIES if legacy_nat_exists(self.node.proc_read, f)]
        if not (any(answer is not False for answer in found + marked) or legacy):
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
            if any(marked):
                self.state(reading).note = (
                    "iptables-nft's nat table holds a rule carrying our comment (a chain of ours under another name?), "
                    'and iptables-save is not installed: it could not be read nor removed.')
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

    def removal(self, match):
        """``match.nat(family, table) -> (rules, chains)`` picks from each
        family's nat table (``iptables_save.NatTable``, as the tools on PATH
        read it); one ``iptables-restore --noflush`` per family removes them."""
        if not self.available():
            return None
        return self.iptables.removal(match.nat)

    def missing_text(self):
        return 'iptables-save/iptables-restore not found; no rules checked.'

    @staticmethod
    def rules_in_place(result, policy):
        """The chain's rules and its jump, per managed family."""
        out = {}
        for family in FAMILIES:
            fam = result.get('ipv%d' % family) or {}
            if fam.get('managed'):
                out[family] = len(fam.get('rules') or []) + (1 if fam.get('jump') else 0)
        return out

    @classmethod
    def after_run(cls, tool, argv, data, results, run):
        """The nat listings with the runs' restore inputs applied (``restore_text.after_run``)."""
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import restore_text  # after mode only: loaded by it alone
        return restore_text.after_run(tool, argv, data, results, run)

    @classmethod
    def after_write(cls, tool, argv, data, run):
        """A daemon's removal as a restore input to apply in memory (``restore_text.after_write``)."""
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import restore_text  # after mode only: loaded by it alone
        return restore_text.after_write(tool, argv, data, run)

    @classmethod
    def after_notes(cls, result):
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import restore_text  # after mode only: loaded by it alone
        return restore_text.after_notes(result)

    def audit_read(self, view, family):
        """The nat table of ``family`` as the tools on PATH show it (their flavour asked first)."""
        if family is None:
            return []
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.audit import read_nat  # the audit's reader: loaded by an audit only
        return read_nat(view, self.name, self.iptables.tools[family], family, None)

    @staticmethod
    def fleet_report_words(chain):
        return {'split': 'the iptables-legacy and the iptables-nft nat table',
                'by_hand': ('iptables -t nat -D POSTROUTING -j %s; iptables -t nat -F %s; iptables -t nat -X %s '
                            '(iptables-legacy for a legacy table, ip6tables for IPv6)' % (chain, chain, chain))}

    @classmethod
    def audit_words(cls, chain, advice):
        """Ours in the chain, and in both flavours' nat tables."""
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.audit import words     # the audit's words: loaded by an audit only
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

    # -- the consumers' words (backend.Backend) ----------------------------------

    @staticmethod
    def holds_policy(result):
        return any((result.get('ipv%d' % family) or {}).get('managed') for family in FAMILIES)

    @staticmethod
    def diff_text(result, which):
        """The chain and its jumps per family, in ``iptables-save`` form."""
        return diff_text(result, which)

    @staticmethod
    def msg_parts(result, check_mode, present, elsewhere):
        """``IPv4 5 rules written (was 0)``, ``IPv6 not managed``; ``IPv4 old chain X removed`` later."""
        # Start-up cost: the msg's words are loaded only by a module run (never by the resync).
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.result_words import did, plural  # pylint: disable=import-outside-toplevel

        changed, steady, later = [], [], []
        for family in FAMILIES:
            name = 'IPv%d' % family
            side = result.get('ipv%d' % family) or {}
            rules = len(side.get('rules') or [])
            if side.get('managed') and present:
                if side.get('changed'):
                    was = len((side.get('before') or {}).get('rules') or [])
                    changed.append(did(check_mode, '%s %s' % (name, plural(rules, 'rule')), 'written', 'write',
                                       ' (was %d)' % was))
                else:
                    steady.append('%s %s' % (name, plural(rules, 'rule')))
            elif side.get('changed'):
                changed.append(did(check_mode, '%s chain' % name, 'removed', 'remove'))
            elif not elsewhere:
                steady.append(('%s not managed' if present else '%s absent') % name)
        # Ours under another chain name (a renamed chain), removed in the same run.
        for family in FAMILIES:
            for other in (result.get('ipv%d' % family) or {}).get('others') or []:
                later.append(did(check_mode, 'IPv%d old chain %s' % (family, other.get('chain')), 'removed', 'remove'))
        return changed, steady, later

    @staticmethod
    def log_lines(result):
        """The ``iptables-restore`` input per family."""
        out = []
        for family in FAMILIES:
            payload = (result.get('ipv%d' % family) or {}).get('restore_input')
            if payload:
                out.append('%s-restore input:\n%s' % (TOOLS[family][0], payload.rstrip('\n')))
        return out

    @staticmethod
    def in_sync_text(result):
        return ('in sync: chain %s and its POSTROUTING jump (%s, iptables %s; %s); nothing written.'
                % (result['chain'], result['backend'], result['iptables_version'], result['selected_backend_reason']))

    @staticmethod
    def drift_words(result, action, said):
        for family in FAMILIES:
            key = 'ipv%d' % family
            if not action.startswith('IPv%d: rewrite chain ' % family):
                continue
            if key in said:
                return ''
            said.add(key)
            found = (result.get(key) or {}).get('drift')
            # Start-up cost: the drift's words are loaded only by a run that repaired something.
            from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import drift as rule_drift  # pylint: disable=import-outside-toplevel

            return rule_drift.describe(found) if found else ''
        return ''

    @staticmethod
    def drift_report(result):
        """'missing' when the chain was in no managed family before the run."""
        families = [result.get('ipv%d' % family) for family in FAMILIES]
        families = [side if isinstance(side, dict) else {} for side in families]
        exists = [((f.get('before') or {}).get('chain_exists')) for f in families if f.get('managed')]
        # Start-up cost: the drift's words are loaded only by a run that reports drift.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import drift as rule_drift  # pylint: disable=import-outside-toplevel

        words = []
        for family, side in zip(FAMILIES, families):
            found = side.get('drift')
            if found and rule_drift.describe(found):
                words.append('IPv%d chain: %s' % (family, rule_drift.describe(found)))
        return 'missing' if exists and not any(exists) else 'drifted', words
