# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
#
# One file over 500 lines on purpose: the read -> plan -> verified write of
# one family, and (issue 26) the look for ours under another chain name that
# the same plan removes in the same restore; splitting the plan from the
# write it frames would put one transaction in two files.
"""The iptables backend: the policy as the nat chain IP-MASQ-AGENT and its
POSTROUTING jump, exactly as the Kubernetes ip-masq-agent writes them.

* render: the chain's rules and the jump (``rules.py``);
* read: one ``iptables-save -t nat`` per family with the node's tools
  (``tools.py``; ``save.py`` parses it);
* plan: what to change, per family, so that the chain equals the policy and
  exactly one correct jump leads to it;
* apply: one ``iptables-restore --noflush`` transaction per family (the one
  place that frames ``*nat`` ... ``COMMIT``).

Works with both iptables backends (nf_tables and legacy), whichever the
node's tools are.  ``sync.sync`` runs read -> plan -> apply under the
writers' lock.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.layout import RANDOM_FULLY_SINCE, IptablesLayout, random_fully
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.rules import (
    chain_drift,
    chains,
    drop_lines,
    jump_spec,
    removal_lines,
    same_rule,
    same_rules,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.tools import TOOLS, missing_tools, payload, tools_for
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import (
    BUILTIN_CHAINS,
    FAMILIES,
    OUR_COMMENT_PREFIX,
    sub_chain_names,
    validate_chain_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import Plan, Step


# --------------------------------------------------------------------------
# Planning, per family
# --------------------------------------------------------------------------

class FamilyPlan:
    """What one family holds and what changes in it."""

    def __init__(self, family, table, chain, managed):
        self.family = family
        self.table = table
        self.chain = chain
        self.managed = managed
        self.jumps = table.jumps_to(chain, 'POSTROUTING') if table is not None else []
        self.chain_exists = table is not None and chain in table.chains
        self.main_rules = [r.line for r in table.rules(chain)] if self.chain_exists else []
        # The sub-chains (policy.sub_chain_names) on the node: ours (name ->
        # rules), or not ours (name -> why): rules outside our chains go to
        # it, or it has rules and none carries our comment.
        self.subs = {}
        self.foreign_subs = {}
        names = list(sub_chain_names(chain).values()) if table is not None else []
        for name in names:
            if name not in table.chains:
                continue
            rules = table.rules(name)
            outside = [r.line for r in table.jumps_to(name) if r.chain != chain and r.chain not in names]
            if outside:
                self.foreign_subs[name] = 'a rule outside our chains goes to it (%s)' % outside[0]
            elif rules and not any((r.comment or '').startswith(OUR_COMMENT_PREFIX) for r in rules):
                self.foreign_subs[name] = ('none of its %d rule%s carries an "ip-masq-agent:" comment (first: %s)'
                                           % (len(rules), '' if len(rules) == 1 else 's', rules[0].line))
            else:
                self.subs[name] = [r.line for r in rules]
        # The chain's rules, then those of our sub-chains.
        self.rules = self.main_rules + [line for lines in self.subs.values() for line in lines]
        self.lines = []             # restore lines, without *nat / COMMIT
        self.actions = []           # what is done, in words
        self.after_rules = []
        self.after_chains = []      # the chains the policy wants, the chain first
        self.after_jump = None
        self.note = None
        self.repaired = []          # what the read after the write found and repaired (_verified_write)
        self.others = []            # FamilyPlan of each chain of ours under another name, removed (_remove_others)

    @property
    def changed(self):
        return bool(self.lines)

    def ours(self):
        """Whether the chain is ours to rewrite or delete: it is empty, or one
        of its rules or of the POSTROUTING jumps to it carries our comment."""
        if not self.main_rules:
            return True
        rules = self.table.rules(self.chain) + self.jumps
        return any((r.comment or '').startswith(OUR_COMMENT_PREFIX) for r in rules)

    def undo_lines(self):
        """Restore lines that take this plan's write back, for a switch of
        backend: a written policy is removed again (the other backend still
        holds it); a removed chain is put back with its rules and its jumps
        at their places in POSTROUTING."""
        chain = self.chain
        if self.managed:
            lines = [self.after_jump.replace('-A', '-D', 1)] + drop_lines(self.after_chains)
        else:
            lines = ([':%s - [0:0]' % name for name in ([chain] if self.chain_exists else []) + list(self.subs)]
                     + list(self.rules))
        # The chains of ours under another name this write removed, put back.
        for other in self.others:
            lines.extend(':%s - [0:0]' % name for name in ([other.chain] if other.chain_exists else [])
                         + list(other.subs))
            lines.extend(other.rules)
        prefix = '-A POSTROUTING '
        jumps = ([] if self.managed else list(self.jumps)) + [r for other in self.others for r in other.jumps]
        lines.extend('-I POSTROUTING %d %s' % (r.index + 1, r.line[len(prefix):])
                     for r in sorted(jumps, key=lambda r: r.index))
        return lines

    def refuse_foreign(self, adopt, what):
        if adopt or self.ours():
            return
        raise MasqError('chain %s (IPv%d) already exists and is not ours: none of its %d rule%s carries an '
                        '"ip-masq-agent:" comment (first: %s). ipmasq.agent will not %s a chain it never wrote. '
                        'Choose another chain name, or run ipmasq.agent.masq_chain once with adopt_chain=true to '
                        'take it over. Nothing was changed.'
                        % (self.chain, self.family, len(self.main_rules), '' if len(self.main_rules) == 1 else 's',
                           self.main_rules[0], what))


def plan_present(family, table, policy, adopt=False):
    plan = FamilyPlan(family, table, policy.chain, True)
    plan.kinds = []             # what each action repairs (metrics.DRIFT_KINDS), next to plan.actions
    plan.refuse_foreign(adopt, 'flush and take over')
    chain = policy.chain
    wanted = chains(policy, family, random_fully(policy, table.version))
    for name in wanted:
        if name in plan.foreign_subs and not adopt:
            raise MasqError('chain %s (IPv%d), a sub-chain this policy needs for chain %s, already exists and is not '
                            'ours: %s. ipmasq.agent will not flush and take over a chain it never wrote. Choose '
                            'another chain name, or run ipmasq.agent.masq_chain once with adopt_chain=true to take '
                            'it over. Nothing was changed.' % (name, family, chain, plan.foreign_subs[name]))
    jump = jump_spec(chain)
    jump_line = '-A POSTROUTING ' + jump
    plan.after_rules = [line for rules in wanted.values() for line in rules]
    plan.after_chains = list(wanted)
    plan.after_jump = jump_line

    postrouting = table.rules('POSTROUTING')
    good = [r for r in plan.jumps if same_rule(r.line, jump_line)]
    bad = [r for r in plan.jumps if not same_rule(r.line, jump_line)]
    if policy.jump_position == 'first':
        jump_ok = len(plan.jumps) == 1 and bool(good) and postrouting[0] is good[0]
    else:
        jump_ok = len(plan.jumps) == 1 and bool(good)

    lines = []
    # Under --noflush, a chain line creates the chain or flushes it, in the
    # same transaction as the rules that refill it; the sub-chains first, so
    # that every goto finds its chain.
    writes = []
    for name, desired in wanted.items():
        exists = name in table.chains
        current = [r.line for r in table.rules(name)]
        if exists and same_rules(current, desired):
            continue
        writes.append(name)
        if not exists:
            plan.actions.append('create chain %s' % name)
            plan.kinds.append('chain_missing')
        else:
            plan.actions.append('rewrite chain %s (%d rules -> %d rules)' % (name, len(current), len(desired)))
            plan.kinds.append('chain_rules')
    for name in reversed(writes):
        lines.append(':%s - [0:0]' % name)
        lines.extend(wanted[name])
    # Our sub-chains the policy no longer uses (it changed form), once
    # nothing goes to them any more.
    stale = [name for name in plan.subs if name not in wanted]
    lines.extend(drop_lines(stale))
    for name in stale:
        plan.actions.append('delete chain %s (no longer used)' % name)
        plan.kinds.append('chain_unwanted')
    if not jump_ok:
        keep_one = policy.jump_position == 'append' and good
        drop = bad + (good[:-1] if keep_one else good)
        lines.extend(rule.deletion() for rule in drop)
        if bad:
            plan.actions.append('remove %d wrong POSTROUTING jump(s) to %s' % (len(bad), chain))
            plan.kinds.append('jump_wrong')
        if keep_one and len(good) > 1:
            plan.actions.append('remove %d duplicate POSTROUTING jump(s) to %s' % (len(good) - 1, chain))
            plan.kinds.append('jump_duplicate')
        if not keep_one:
            # The jump written again: missing, replacing a wrong one, or
            # (jump_position first) moved to the top, duplicates dropped.
            plan.kinds.append('jump_missing' if not plan.jumps else 'jump_wrong' if bad
                              else 'jump_duplicate' if len(good) > 1 else 'jump_position')
            if policy.jump_position == 'first':
                lines.append('-I POSTROUTING 1 ' + jump)
                verb = 'move' if plan.jumps else 'insert'
                plan.actions.append('%s the POSTROUTING jump to %s at position 1' % (verb, chain))
            else:
                lines.append(jump_line)
                plan.actions.append('append the POSTROUTING jump to %s' % chain)
    plan.lines = lines
    _remove_others(plan)
    return plan


def others_before(fam):
    """The chains of ours under another name that ``fam`` removes, as they
    were (the result's ``others``): name, rules (its sub-chains' too) and jumps."""
    return [{'chain': other.chain, 'chain_exists': other.chain_exists, 'rules': other.rules,
             'jumps': [r.line for r in other.jumps]} for other in fam.others]


def _ours(rule):
    """Whether a rule carries our comment (the cheap test on the line first)."""
    return OUR_COMMENT_PREFIX in rule.line and (rule.comment or '').startswith(OUR_COMMENT_PREFIX)


def ours_elsewhere(table, chain):
    """The chains of ours in ``table`` under another name than ``chain``
    and its sub-chains: left by a run with another chain name (a renamed
    chain).  Ours is recognised by our comment only (``OUR_COMMENT_PREFIX``,
    either rule format): a chain with a rule that carries it, or that a
    POSTROUTING jump carrying it goes to.  A chain without it is never ours
    here, whatever its name.  Each chain is named once: a sub-chain of
    another one found goes with it (``plan_absent``)."""
    if table is None:
        return []
    own = set(sub_chain_names(chain).values())
    own.add(chain)
    found = []
    for name, rules in table.chains.items():
        if name in own or name in BUILTIN_CHAINS:
            continue
        if any(_ours(r) for r in rules):
            found.append(name)
    for rule in table.rules('POSTROUTING'):
        if _ours(rule):
            target = rule.target
            if target in table.chains and target not in own and target not in found:
                found.append(target)
    mains, subs = [], set()
    for name in found:
        try:
            subs.update(sub_chain_names(name).values())
        except MasqError:
            continue        # a name we would never write: not a chain of ours to plan for
        mains.append(name)
    return [name for name in mains if name not in subs]


def _remove_others(plan):
    """Remove every chain of ours under another name (``ours_elsewhere``)
    and its POSTROUTING jumps, in the same restore as ``plan``'s own lines:
    after a chain rename the old chain no longer decides anything."""
    for name in ours_elsewhere(plan.table, plan.chain):
        other = plan_absent(plan.family, plan.table, name, strict=False, others=False)
        if not other.changed:
            continue
        plan.others.append(other)
        plan.actions.extend('%s (ours under another chain name)' % action for action in other.actions)
        plan.kinds.extend(other.kinds)
    if plan.others:
        # Every jump first, then every chain flushed, then deleted: a chain
        # is deleted only once nothing goes to it.
        jumps = [r for other in plan.others for r in other.jumps]
        chains = [name for other in plan.others
                  for name in ([other.chain] if other.chain_exists else []) + list(other.subs)]
        plan.lines = plan.lines + removal_lines(jumps) + drop_lines(chains)


def plan_absent(family, table, chain, adopt=False, strict=True, others=True):
    """Remove the jumps and the chain, and (``others``) every chain of ours
    under another name.  A chain of the name that is not ours is an error
    (``strict``: state=absent), or is left alone with a note (the IPv6 side of
    a run that does not manage IPv6)."""
    plan = FamilyPlan(family, table, chain, False)
    plan.kinds = []
    if plan.chain_exists and not adopt and not plan.ours():
        if not strict:
            plan.note = 'chain %s exists but is not ours; left alone.' % chain
            if others:
                _remove_others(plan)
            return plan
        plan.refuse_foreign(adopt, 'delete')
    foreign = [r.line for r in table.jumps_to(chain) if r.chain != 'POSTROUTING']
    if foreign:
        raise MasqError('cannot remove chain %s (IPv%d): rules outside POSTROUTING jump to it and '
                        'are not ours to delete: %s. Remove them first. Nothing was changed.'
                        % (chain, family, '; '.join(foreign)))
    if plan.jumps:
        plan.actions.append('remove %d POSTROUTING jump(s) to %s' % (len(plan.jumps), chain))
    # The chain and our sub-chains: all flushed, then deleted.
    drop = ([chain] if plan.chain_exists else []) + list(plan.subs)
    subs = list(plan.subs)
    if plan.chain_exists:
        plan.actions.append('delete chain %s' % chain + (' and its sub-chain%s %s' % (
            '' if len(subs) == 1 else 's', ', '.join(subs)) if subs else ''))
    elif subs:
        plan.actions.append('delete chain%s %s' % ('' if len(subs) == 1 else 's', ', '.join(subs)))
    # Ours where the policy wants none (a family it does not manage, or
    # state=absent); _core/registry/backends.py calls it other_backend in a switch.
    plan.kinds = ['chain_unwanted'] * len(plan.actions)
    if len(drop) <= 1:
        plan.lines = removal_lines(plan.jumps, drop)
    else:
        plan.lines = removal_lines(plan.jumps) + drop_lines(drop)
    if others:
        _remove_others(plan)
    return plan


# --------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------

class IptablesReading:
    """What one run read of iptables: the nat table of each family it could read."""

    def __init__(self, tools):
        self.tools = tools
        self.tables = {}        # family -> NatTable
        self.notes = {}         # family -> why it was not read
        self.plans = {}         # family -> FamilyPlan, filled by plan()


class IptablesBackend:
    """The policy in iptables; see the module docstring."""

    name = 'iptables'

    def __init__(self, run, find):
        self.tools = tools_for(run, find)

    def read(self, policy, chain=None):
        """One ``iptables-save -t nat`` per family.  A family the policy
        manages must be readable whole; IPv6 when not managed is read to
        remove an IPv6 chain of ours left by an earlier run, and skipped
        when the kernel has no IPv6 nat table."""
        managed = policy.families() if policy is not None else ()
        reading = IptablesReading(self.tools)
        for family in FAMILIES:
            tools = self.tools[family]
            want = family in managed
            if not tools.available:
                if want:
                    raise MasqError(missing_tools(family))
                reading.notes[family] = missing_tools(family)
                continue
            try:
                table = tools.read()
            except MasqError:
                if want or family == 4:
                    raise
                reading.notes[family] = 'ip6tables-save could not read the nat table; skipped.'
                continue
            if want or family == 4:
                table.check(family, TOOLS[family][1])
            elif table.incomplete or table.problems:
                reading.notes[family] = ('%s could not show the whole IPv6 nat table; skipped (IPv6 is not '
                                         'managed here).' % TOOLS[family][1])
                continue
            reading.tables[family] = table
        return reading

    def plan(self, reading, policy, chain=None, adopt=False, strict=None, undo=False):
        """The steps, one per family that changes.  Without a policy every
        chain of ours is removed; a chain of that name that is not ours is
        then an error (``strict``, the default for state=absent) or left
        alone.  ``undo``: each step can be taken back (a switch of backend)."""
        chain = policy.chain if policy is not None else validate_chain_name(chain)
        managed = policy.families() if policy is not None else ()
        if strict is None:
            strict = policy is None
        for family, table in sorted(reading.tables.items()):
            if family in managed:
                IptablesLayout(policy, family).check()
                if policy.random_fully and table.version and table.version < RANDOM_FULLY_SINCE:
                    raise MasqError('random_fully: the installed %s (v%s) does not support --random-fully '
                                    '(needs 1.6.2 or later). Nothing was changed.'
                                    % (TOOLS[family][0], '.'.join(str(x) for x in table.version)))
                reading.plans[family] = plan_present(family, table, policy, adopt)
            else:
                reading.plans[family] = plan_absent(family, table, chain, adopt, strict=strict)
        steps = []
        for family, fam in sorted(reading.plans.items()):
            if fam.changed:
                tools = self.tools[family]
                tools.commands.append(' '.join(tools.restore_argv()))
                back = _restore(tools, fam.undo_lines()) if undo else None
                step = Step('IPv%d' % family, fam.actions, _restore(tools, fam.lines), back, fam.kinds)
                if fam.managed:
                    tools.commands.append(' '.join(tools.save_argv()))     # the read that verifies the write
                    step.write = _verified_write(tools, fam, policy, step)
                steps.append(step)
        return Plan(steps)

    def result(self, reading, plan, policy, state):
        """The ``masq_chain`` module's result."""
        chain = next((p.chain for p in reading.plans.values()), policy.chain if policy is not None else None)
        result = {'changed': plan.changed, 'chain': chain, 'state': state, 'backend': None,
                  'iptables_version': None, 'commands': [], 'actions': plan.actions,
                  'warnings': list(policy.warnings) if policy is not None else [], 'ipv4': None, 'ipv6': None}
        for family in FAMILIES:
            tools = self.tools[family]
            result['commands'].extend(tools.commands)
            table = reading.tables.get(family)
            if table is not None and (family == 4 or result['backend'] is None):
                result['backend'] = table.backend
                result['iptables_version'] = '.'.join(str(x) for x in table.version) if table.version else None
            fam = reading.plans.get(family)
            if fam is None:
                result['ipv%d' % family] = {'managed': False, 'present': False, 'changed': False,
                                            'note': reading.notes.get(family)}
                continue
            result['ipv%d' % family] = {
                'managed': fam.managed,
                'changed': fam.changed,
                'before': {'chain_exists': fam.chain_exists, 'rules': fam.rules,
                           'jumps': [r.line for r in fam.jumps]},
                'rules': fam.after_rules,
                'jump': fam.after_jump,
                'restore_input': payload(fam.lines) if fam.lines else None,
                # Which rules a rewrite puts back or takes out (None: the chain is new, or as wanted).
                'drift': (chain_drift(fam.rules, fam.after_rules)
                          if fam.managed and fam.chain_exists and fam.changed else None),
            }
            if fam.others:
                result['ipv%d' % family]['others'] = others_before(fam)
            if fam.note:
                result['ipv%d' % family]['note'] = fam.note
                result['warnings'].append('IPv%d: %s' % (family, fam.note))
            if fam.repaired:
                result['warnings'].append('IPv%d: another program changed the nat table while this run wrote it '
                                          '(iptables-restore may have waited for it, for the xtables lock); the read '
                                          'after the write found it and this run repaired it: %s.'
                                          % (family, '; '.join(fam.repaired)))
        return result

    # -- the daemon modules' clean-up ------------------------------------

    def removal(self, select, families=FAMILIES):
        """``(read, plan)`` for ``sync.locked`` that delete what
        ``select(family, table) -> (rules, chains)`` picks (rules as
        ``iptables_save.Rule``), one restore per family.  IPv6 is skipped
        when it cannot be read."""

        def read():
            reading = IptablesReading(self.tools)
            for family in families:
                tools = self.tools[family]
                if not tools.available:
                    reading.notes[family] = missing_tools(family)
                    continue
                try:
                    table = tools.read()
                except MasqError:
                    if family == 4:
                        raise
                    reading.notes[family] = 'ip6tables-save could not read the nat table; skipped.'
                    continue
                table.check(family, TOOLS[family][1])
                reading.tables[family] = table
            return reading

        def plan(reading):
            steps = []
            for family, table in sorted(reading.tables.items()):
                rules, chains = select(family, table)
                if rules or chains:
                    actions = [r.line for r in rules] + ['chain %s' % c for c in chains]
                    lines = removal_lines(rules, chains)
                    steps.append(Step('IPv%d' % family, actions,
                                      lambda tools=self.tools[family], lines=lines: tools.restore(lines)))
            return Plan(steps)

        return read, plan


def _restore(tools, lines):
    """A step's write (or undo): one restore of ``lines`` with ``tools``."""
    return lambda: tools.restore(lines)


VERIFY_REPAIRS = 1
RACED = ' (another writer changed the nat table while this run wrote it: found by the read after the write)'


def _verified_write(tools, fam, policy, step):
    """The write of a family the policy manages, then one read to verify it.

    ``iptables-restore --wait`` waits while another program holds the
    xtables lock; a writer that is not ours (not under our writers' lock)
    may add our jump meanwhile, and the table then holds two.  So after the
    write the table is read once more (only a run that wrote pays it) and
    planned again: what differs (a duplicate jump, mostly) is repaired in the
    same run, and said in the step's actions.  Bounded: one repair, then
    one more read; a table that still differs is an error."""

    def write():
        tools.restore(fam.lines)
        for repairs in range(VERIFY_REPAIRS + 1):
            try:
                table = tools.read(record=repairs > 0)
                table.check(fam.family, TOOLS[fam.family][1])
            except MasqError as e:
                raise MasqError('IPv%d: the write was applied (%s), but reading it back failed: %s'
                                % (fam.family, '; '.join(step.actions), e.msg), **dict(e.details, changed=True))
            again = plan_present(fam.family, table, policy, adopt=True)
            if not again.changed:
                return
            if repairs == VERIFY_REPAIRS:
                raise MasqError('IPv%d: the write was applied (%s), but the nat table still differs from the policy '
                                'after it was repaired once: another program keeps changing chain %s or its '
                                'POSTROUTING jump (%s). Find that program, then run again.'
                                % (fam.family, '; '.join(step.actions), fam.chain, '; '.join(again.actions)),
                                changed=True)
            tools.commands.append(' '.join(tools.restore_argv()))
            tools.restore(again.lines)
            step.actions.extend(action + RACED for action in again.actions)
            step.kinds.extend(again.kinds)
            fam.repaired.extend(again.actions)

    return write
