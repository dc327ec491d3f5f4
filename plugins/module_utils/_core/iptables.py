# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The iptables backend: the policy as the nat chain IP-MASQ-AGENT and its
POSTROUTING jump, exactly as the Kubernetes ip-masq-agent writes them.

* render: the chain's rules and the jump, as iptables-save prints them (the
  form the Kubernetes docs show, so ``iptables -t nat -L`` matches them);
* read: one ``iptables-save -t nat`` per family (``iptables_save.py`` reads it);
* plan: what to change, per family, so that the chain equals the policy and
  exactly one correct jump leads to it;
* apply: one ``iptables-restore --noflush`` transaction per family (the one
  place that frames ``*nat`` ... ``COMMIT``).

Works with both iptables backends (nf_tables and legacy), whichever the
node's tools are.  ``sync.sync`` runs read -> plan -> apply under the
writers' lock.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ipmasq.agent.plugins.module_utils._core import drift as rule_drift
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_layout import (
    RANDOM_FULLY_SINCE,
    IptablesLayout,
    gates as policy_gates,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_save import (
    parse_save,
    parse_version,
    rule_key,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import (
    FAMILIES,
    OUR_COMMENT_PREFIX,
    port_text,
    snat_text,
    sub_chain_names,
    validate_chain_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.ranges import CATCH_ALL
from ansible_collections.ipmasq.agent.plugins.module_utils._core.sync import Plan, Step

RESTORE_WAIT_SECONDS = 30
# The legacy (x_tables) tables the kernel has made, per family: a legacy nat
# table holds rules only when it is listed there (reading it would make it).
PROC_TABLES = {4: '/proc/net/ip_tables_names', 6: '/proc/net/ip6_tables_names'}
MASQ_PROTOCOLS = ('tcp', 'udp', 'sctp')
TOOLS = {
    4: ('iptables', 'iptables-save', 'iptables-restore'),
    6: ('ip6tables', 'ip6tables-save', 'ip6tables-restore'),
}

# The jump's comment (the same in both rule formats) and the match every
# docs-format rule carries; the chain rules' comments are the policy's
# (policy.COMMENTS).  rule_format upstream's chain rules carry no addrtype
# match: the jump already has it.
COMMENT_JUMP = ('ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination '
                'traffic to our custom %s chain')
NOT_LOCAL = '-m addrtype ! --dst-type LOCAL'


def read_proc(path):
    """The words of a /proc file (its table names), or [] when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().split()
    except (IOError, OSError):
        return []


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


def removal_lines(rules, chains=()):
    """Restore lines (under ``--noflush``) that delete the given rules
    (``iptables_save.Rule``) and then flush and delete the given chains."""
    lines = [rule.deletion() for rule in rules]
    for chain in chains:
        lines.extend((':%s - [0:0]' % chain, '-X %s' % chain))
    return lines


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------

def probability_text(probability):
    """A probability as iptables-save prints it after the kernel's
    fixed-point rounding (u32 = lround(p * 2^31), printed with 11 decimals)."""
    fixed = int(probability * 0x80000000 + 0.5)
    return '%.11f' % (fixed / 0x80000000)


def jump_spec(chain):
    """The POSTROUTING jump, without the leading ``-A POSTROUTING``."""
    return '-m comment --comment "%s" %s -j %s' % (COMMENT_JUMP % chain, NOT_LOCAL, chain)


def _matched(policy, comment):
    """A rule's comment match, and (rule_format docs) the addrtype match."""
    tail = '' if policy.rule_format == 'upstream' else ' ' + NOT_LOCAL
    return '-m comment --comment "%s"%s' % (comment, tail)


def _address_match(option, cidr, family):
    """``-s``/``-d`` as iptables-save prints it: nothing for everything."""
    return '' if cidr is None or cidr == CATCH_ALL[family] else '%s %s ' % (option, cidr)


def _target(policy, family, ports, random_fully):
    """``-j MASQUERADE ...`` or, with snat_to, ``-j SNAT --to-source ...``."""
    verb, addresses = policy.target(family)
    if verb == 'MASQUERADE':
        text = '-j MASQUERADE' + (' --to-ports %s' % port_text(*ports) if ports else '')
    else:
        where = snat_text(*addresses)
        if ports:
            where = '%s:%s' % ('[%s]' % where if family == 6 else where, port_text(*ports))
        text = '-j SNAT --to-source ' + where
    return text + (' --random-fully' if random_fully else '')


def _rewrite_specs(policy, family, random_fully, comment, destination=None, gates=None):
    """The rules that rewrite the source, for each source / out-interface
    pair (``gates``, by default the policy's: one without matches unless
    they are set): with to_ports one rule per protocol and range, a range
    picked with the probability of its share of the ports still left to
    pick from; then the rule for the rest."""
    match = _matched(policy, comment)
    specs = []
    for source, interface in policy_gates(policy, family) if gates is None else gates:
        head = (_address_match('-s', source, family) + _address_match('-d', destination, family)
                + ('-o %s ' % interface if interface else ''))
        sizes = [high - low + 1 for low, high in policy.port_ranges]
        for proto in MASQ_PROTOCOLS if policy.port_ranges else ():
            remaining = sum(sizes)
            for ports, size in zip(policy.port_ranges, sizes):
                stat = ''
                if size != remaining:
                    stat = ' -m statistic --mode random --probability %s' % probability_text(size / remaining)
                specs.append('%s-p %s %s%s %s' % (head, proto, match, stat,
                                                  _target(policy, family, ports, random_fully)))
                remaining -= size
        specs.append('%s%s %s' % (head, match, _target(policy, family, None, random_fully)))
    return specs


def chain_rules(policy, family, random_fully=None):
    """The rules for one family, as iptables-save prints them (which
    writes no ``-d`` for 0.0.0.0/0 or ::/0): the chain's, then those of its
    sub-chains (:func:`chains`).  ``random_fully`` None: the policy's own
    choice, or off when it leaves it to the iptables version (``plan``
    passes ``policy.random_fully_for(version)``)."""
    return [line for rules in chains(policy, family, random_fully).values() for line in rules]


def chains(policy, family, random_fully=None):
    """Our chains for one family and their rules (name -> rules, the
    policy's chain first), in the form ``iptables_layout.IptablesLayout``
    chose: the one chain (flat), or the chain and the sub-chains it goes to
    (split)."""
    if random_fully is None:
        random_fully = bool(policy.random_fully)
    layout = IptablesLayout(policy, family)
    if not layout.split:
        return {policy.chain: _flat_rules(policy, family, random_fully)}
    return _split_chains(policy, family, random_fully, layout)


def _flat_rules(policy, family, random_fully):
    """The one chain, as the upstream agent writes it.  In order: the
    exceptions (rewritten), the kept destinations (RETURN), then the rewrite
    of everything else or, with masquerade_cidrs, of the listed
    destinations only (the rest falls off the chain's end).  Each rewriting
    rule is written for every source and interface pair."""
    ret = _matched(policy, policy.comments()['return']) + ' -j RETURN'
    specs = []
    for cidr in policy.exceptions[family]:
        specs.extend(_rewrite_specs(policy, family, random_fully, policy.action_comment(family, 'exception'), cidr))
    specs.extend(_address_match('-d', cidr, family) + ret for cidr in policy.kept(family))
    if policy.masquerade_only:
        for cidr in policy.listed[family]:
            specs.extend(_rewrite_specs(policy, family, random_fully, policy.action_comment(family, 'listed'), cidr))
    else:
        specs.extend(_rewrite_specs(policy, family, random_fully, policy.action_comment(family)))
    prefix = '-A %s ' % policy.chain
    return [prefix + spec for spec in specs]


def _split_chains(policy, family, random_fully, layout):
    """The split form (``iptables_layout.IptablesLayout``): the gates go (``-g``) to
    the policy sub-chain, whose rewriting rules go to the rewrite sub-chain.
    A goto's RETURN, or the end of the chain it went to, leaves the policy
    as the chain's own RETURN or end does, so the decisions are the flat
    form's: a packet from another source or interface passes no gate and
    keeps its source."""
    comments = policy.comments()
    names = policy.sub_chains
    main = policy.chain
    out = {main: []}     # dicts keep their order (no collections: its import costs a resync cycle)
    body = main
    if layout.gated:
        body = names['policy']
        if layout.two_gates:
            gate = _matched(policy, comments['gate_both'])
            to_sources = _matched(policy, comments['to_sources'])
            out[main] = ['-o %s %s -g %s' % (interface, to_sources, names['sources'])
                         for interface in policy.out_interfaces]
            out[names['sources']] = ['%s%s -g %s' % (_address_match('-s', source, family), gate, body)
                                     for source in policy.sources[family]]
        else:
            kind = ('gate_both' if policy.sources[family] and policy.out_interfaces
                    else 'gate_sources' if policy.sources[family] else 'gate_interfaces')
            gate = _matched(policy, comments[kind])
            out[main] = ['%s%s%s -g %s' % (_address_match('-s', source, family),
                                           '-o %s ' % interface if interface else '', gate, body)
                         for source, interface in policy_gates(policy, family)]
        out[body] = []

    if layout.rewrite_chain:
        def rewrite(comment, destination=None):
            return ['%s%s -g %s' % (_address_match('-d', destination, family), _matched(policy, comment),
                                    names['rewrite'])]
    else:
        def rewrite(comment, destination=None):
            return _rewrite_specs(policy, family, random_fully, comment, destination, gates=[(None, None)])

    specs = out[body]
    for cidr in policy.exceptions[family]:
        specs.extend(rewrite(policy.action_comment(family, 'exception'), cidr))
    ret = _matched(policy, comments['return']) + ' -j RETURN'
    specs.extend(_address_match('-d', cidr, family) + ret for cidr in policy.kept(family))
    if policy.masquerade_only:
        for cidr in policy.listed[family]:
            specs.extend(rewrite(policy.action_comment(family, 'listed'), cidr))
    else:
        specs.extend(rewrite(policy.action_comment(family)))
    if layout.rewrite_chain:
        out[names['rewrite']] = _rewrite_specs(policy, family, random_fully, policy.action_comment(family, 'rewrite'),
                                               gates=[(None, None)])
    return dict((name, ['-A %s %s' % (name, spec) for spec in rules]) for name, rules in out.items())


def same_rule(current, desired):
    return current == desired or rule_key(current) == rule_key(desired)


def same_rules(current, desired):
    if len(current) != len(desired):
        return False
    return all(same_rule(c, d) for c, d in zip(current, desired))


# --------------------------------------------------------------------------
# The node's tools
# --------------------------------------------------------------------------

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
            return [self.after_jump.replace('-A', '-D', 1)] + drop_lines(self.after_chains)
        lines = [':%s - [0:0]' % name for name in [chain] + list(self.subs)] + list(self.rules)
        prefix = '-A POSTROUTING '
        lines.extend('-I POSTROUTING %d %s' % (r.index + 1, r.line[len(prefix):])
                     for r in sorted(self.jumps, key=lambda r: r.index))
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


def drop_lines(chains):
    """Restore lines that flush and then delete ``chains`` (all flushed
    first: a chain can be deleted only once no rule goes to it)."""
    return [':%s - [0:0]' % name for name in chains] + ['-X %s' % name for name in chains]


def plan_present(family, table, policy, adopt=False):
    plan = FamilyPlan(family, table, policy.chain, True)
    plan.kinds = []             # what each action repairs (metrics.DRIFT_KINDS), next to plan.actions
    plan.refuse_foreign(adopt, 'flush and take over')
    chain = policy.chain
    wanted = chains(policy, family, policy.random_fully_for(table.version))
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
    return plan


def plan_absent(family, table, chain, adopt=False, strict=True):
    """Remove the jumps and the chain.  A chain that is not ours is an error
    (``strict``: state=absent), or is left alone with a note (the IPv6 side of
    a run that does not manage IPv6)."""
    plan = FamilyPlan(family, table, chain, False)
    plan.kinds = []
    if plan.chain_exists and not adopt and not plan.ours():
        if not strict:
            plan.note = 'chain %s exists but is not ours; left alone.' % chain
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
    # state=absent); backends.py calls it other_backend in a switch.
    plan.kinds = ['chain_unwanted'] * len(plan.actions)
    if len(drop) <= 1:
        plan.lines = removal_lines(plan.jumps, drop)
    else:
        plan.lines = removal_lines(plan.jumps) + drop_lines(drop)
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


Reading = IptablesReading     # the name before backend.py (tests use it)


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
                'drift': (rule_drift.iptables_chain(fam.rules, fam.after_rules)
                          if fam.managed and fam.chain_exists and fam.changed else None),
            }
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


def sub_declarations(lines, chain):
    """``:NAME - [0:0]`` for each chain other than ``chain`` that ``lines`` (``-A`` lines) fill."""
    names = []
    for line in lines:
        name = line.split(' ', 2)[1] if line.startswith('-A ') else None
        if name and name != chain and name not in names:
            names.append(name)
    return [':%s - [0:0]' % name for name in names]


def diff_text(result, which):
    """Text for diff mode: the chain and its jumps per family, before or after."""
    out = []
    for family in FAMILIES:
        fam = result.get('ipv%d' % family)
        if not fam or 'before' not in fam:
            continue
        out.append('# %s nat (IPv%d)' % (TOOLS[family][0], family))
        if which == 'before':
            out.extend(fam['before']['jumps'])
            if fam['before']['chain_exists']:
                out.append(':%s - [0:0]' % result['chain'])
            out.extend(sub_declarations(fam['before']['rules'], result['chain']))
            out.extend(fam['before']['rules'])
        elif fam['managed']:
            out.append(fam['jump'])
            out.append(':%s - [0:0]' % result['chain'])
            out.extend(sub_declarations(fam['rules'], result['chain']))
            out.extend(fam['rules'])
    return '\n'.join(out) + '\n'
