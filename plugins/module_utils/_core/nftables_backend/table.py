# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The nftables backend's decisions: whether our table (``rules.py``
spells it) is as the policy wants it, and the plan that makes it so.

* read: one ``nft -j`` listing of the table (``tools.py``; ``nft_json.py``
  parses it);
* plan: compare the table with the policy: its sets as address intervals
  (what the kernel keeps after merging), its rules as nft prints them;
* apply: one atomic ``nft -j -f -`` transaction that declares the table,
  deletes it and adds it again, whole (a flush would keep a foreign chain,
  set or table flag); ``state=absent`` deletes it.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.drift import compare
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.intervals import BITS, merge
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.names import CHAIN, table_label
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import render_rule
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.rules import (
    ADDR_TYPES,
    SET_NAMES,
    Desired,
    flags_of,
    canonical_text,
    delete_commands,
    element_interval,
    element_texts,
    priority_text,
    render_desired,
    render_live,
    replace_commands,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import OUR_COMMENT_PREFIX


# --------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------

def _same_elements(live, desired, name):
    """Whether the set holds exactly the addresses of the policy's CIDRs.
    First as text: the CIDRs the set lists are the list's CIDRs (as nft
    prints them and the policy keeps them, canonical); then, when the list
    has overlapping or adjacent entries (merged in the set) or nft lists a
    range, as address intervals."""
    family, cidrs = desired.set_cidrs[name]
    bits = '/%d' % BITS[family]
    texts = set()
    add = texts.add
    for elem in live:
        if elem.__class__ is str:
            add(elem + bits)
            continue
        prefix = elem.get('prefix') if elem.__class__ is dict else None
        if prefix is None:
            break
        add('%s/%s' % (prefix.get('addr'), prefix.get('len')))
    else:
        if texts == set(cidrs):
            return True
    intervals = []
    for elem in live:
        interval = element_interval(elem, family)
        if interval is None:
            return False
        intervals.append(interval)
    return merge(intervals) == desired.sets[name]


def same_rules(live, desired):
    """Whether the chain's rules as read (``nft -j`` rule objects) are the
    policy's (``Desired.rules``): the same rules in the same order, each
    anonymous set compared as a set.  As text first (a table in sync reads
    back as written), then with every set put in one order."""
    texts = [render_rule(r) for r in live]
    if texts == desired.rule_texts():
        return True
    if len(texts) != len(desired.rules):
        return False
    return ([canonical_text(r.get('expr', []), r.get('comment')) for r in live]
            == [canonical_text(expr, comment) for expr, comment in desired.rules])


def differences(table, desired):
    """What differs between the table read and the one wanted, in words
    (empty: in sync)."""
    if table.unreadable is not None:
        return ['nft cannot list it as JSON (a dormant table?)']
    diffs = []
    if flags_of(table.info):
        diffs.append('table flags %s' % ','.join(flags_of(table.info)))
    diffs.extend('foreign %s %s' % (kind, name) for kind, name in table.others)
    diffs.extend('foreign map %s' % name for name in table.maps)
    wanted_sets = dict((name, family) for name, (family, _cidrs) in desired.set_cidrs.items())
    for name, obj in table.sets.items():
        family = wanted_sets.get(name)
        if family is None:
            diffs.append('foreign set %s' % name)
        elif obj.get('type') != ADDR_TYPES[family] or set(flags_of(obj)) != set(['interval']):
            diffs.append('set %s is not a %s interval set' % (name, ADDR_TYPES[family]))
        elif not _same_elements(obj.get('elem') or [], desired, name):
            diffs.append('set %s: %d element(s), %d wanted'
                         % (name, len(obj.get('elem') or []), len(desired.elements[name])))
    diffs.extend('set %s missing' % name for name in wanted_sets if name not in table.sets)
    for name, chain in table.chains.items():
        if name != CHAIN:
            diffs.append('foreign chain %s' % name)
        elif (chain.get('type'), chain.get('hook'), chain.get('prio'), chain.get('policy')) != \
                ('nat', 'postrouting', desired.priority, 'accept'):
            # At another priority (srcnat, before 2.0.0; the other jump_position): the kernel cannot move a
            # base chain, so the table is replaced whole, in one transaction (plan_present).
            diffs.append('chain %s is not a nat postrouting chain at priority %s'
                         % (CHAIN, priority_text(desired.priority)))
    if CHAIN not in table.chains:
        diffs.append('chain %s missing' % CHAIN)
    else:
        rules = table.rules.get(CHAIN, [])
        if not same_rules(rules, desired):
            diffs.append('chain %s: %d rule(s), %d wanted%s'
                         % (CHAIN, len(rules), len(desired.rules),
                            '' if len(rules) != len(desired.rules) else ', in another form'))
    return diffs


def carries_our_comment(table):
    """A table with a rule of ours (our comment): how ours under another
    name is told (a renamed chain's table); an empty table is not."""
    if table is None:
        return False
    if table.unreadable is not None:
        return OUR_COMMENT_PREFIX in table.unreadable
    return any((r.get('comment') or '').startswith(OUR_COMMENT_PREFIX) for rs in table.rules.values() for r in rs)


def is_ours(table):
    """A table with a rule of ours (our comment), or with nothing but objects
    of our names (empty, or ours with its rules flushed)."""
    if table is None:
        return False
    if table.unreadable is not None:
        return OUR_COMMENT_PREFIX in table.unreadable
    rules = [r for rs in table.rules.values() for r in rs]
    if any((r.get('comment') or '').startswith(OUR_COMMENT_PREFIX) for r in rules):
        return True
    return (not rules and not table.maps and not table.others and set(table.chains) <= set([CHAIN])
            and set(table.sets) <= SET_NAMES)


# --------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------

class TablePlan:
    """What our table holds and what changes in it."""

    def __init__(self, name, table, managed):
        self.name = name
        self.table = table
        self.managed = managed
        self.exists = table is not None
        self.commands = []          # the transaction, libnftables JSON commands
        self.actions = []
        self.desired = None         # nftables_rules.Desired, for a table to write
        self.note = None
        self.others = []            # (name, nft_json.NftTable): our tables under another name, deleted

    @property
    def before(self):
        """The table as read, as ``nft list table`` shows it (None: no table)."""
        return render_live(self.table) if self.table is not None else None

    @property
    def after(self):
        """The table after the run (None: deleted, or not managed)."""
        if not self.managed:
            return None if self.changed else self.before
        return render_desired(self.desired) if self.changed else self.before

    @property
    def changed(self):
        return bool(self.commands)

    def refuse_foreign(self, adopt, what):
        if adopt or not self.exists or is_ours(self.table):
            return
        raise MasqError('%s already exists and is not ours: none of its rules carries an "ip-masq-agent:" comment. '
                        'ipmasq.agent will not %s a table it never wrote. Choose another chain name (the table is '
                        'named after it), or run ipmasq.agent.masq_chain once with adopt_chain=true to take it over. '
                        'Nothing was changed.' % (table_label(self.name), what))


def plan_present(table, policy, adopt=False):
    desired = Desired(policy)
    plan = TablePlan(desired.name, table, True)
    plan.kinds = []             # what each action repairs (metrics.DRIFT_KINDS), next to plan.actions
    plan.refuse_foreign(adopt, 'replace')
    plan.desired = desired
    if table is None:
        plan.actions.append('create %s (%s)' % (table_label(desired.name), ', '.join(
            '%s: %d element(s)' % (name, len(desired.elements[name])) for name in desired.set_cidrs)))
        plan.kinds.append('table_missing')
    else:
        diffs = differences(table, desired)
        if not diffs:
            return plan
        plan.actions.append('rewrite %s (%s)' % (table_label(desired.name), '; '.join(diffs)))
        plan.kinds.append('table_rewritten')
    plan.commands = replace_commands(desired)
    return plan


def remove_others(plan, others):
    """Delete our tables under other names (``others``: name -> table, each
    carrying our comment: a renamed chain's) in ``plan``'s own transaction."""
    for name in sorted(others):
        plan.others.append((name, others[name]))
        plan.actions.append('delete %s (ours under another chain name)' % table_label(name))
        plan.kinds.append('table_unwanted')
        plan.commands = plan.commands + delete_commands(name)
    return plan


def plan_absent(table, name, adopt=False, strict=True):
    """Delete the table.  One that is not ours is an error (``strict``), or
    is left alone with a note."""
    plan = TablePlan(name, table, False)
    plan.kinds = []
    if table is None:
        return plan
    if not adopt and not is_ours(table):
        if not strict:
            plan.note = '%s exists but is not ours; left alone.' % table_label(name)
            return plan
        plan.refuse_foreign(adopt, 'delete')
    plan.actions.append('delete %s' % table_label(name))
    # Ours where the policy wants none (state=absent); _core/registry/backends.py calls it
    # other_backend when the policy lives in iptables.
    plan.kinds.append('table_unwanted')
    plan.commands = delete_commands(name)
    return plan


def table_drift(table, desired):
    """Our nftables table as read (``nft_json.NftTable``) against the one
    wanted (``nftables_rules.Desired``): ``{'rules': compare(...), 'sets': {name:
    {'missing': [...], 'extra': [...]}}}`` with the rules of our chain in nft
    syntax and the elements of each set that differs as nft lists them.
    None when the table cannot be read as JSON."""
    if table is None or table.unreadable is not None:
        return None
    live_rules = table.rules.get(CHAIN, [])
    live = [render_rule(r) for r in live_rules]
    # A rule whose anonymous set nft lists in its own order is the same rule (nftables.same_rules).
    canon = {}
    for text, expr, comment in ([(t, r.get('expr', []), r.get('comment')) for t, r in zip(live, live_rules)]
                                + [(t, e, c) for t, (e, c) in zip(desired.rule_texts(), desired.rules)]):
        canon[text] = canonical_text(expr, comment)
    out = {'rules': compare(live, desired.rule_texts(), canon.get),
           'sets': {}}
    for name in sorted(desired.set_cidrs):
        live = (table.sets.get(name) or {}).get('elem') or []
        found = compare(element_texts(live), element_texts(desired.elements[name]))
        if found['missing'] or found['extra']:
            out['sets'][name] = {'missing': found['missing'], 'extra': found['extra']}
    return out
