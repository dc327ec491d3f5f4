# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The answer for one flow (pure; tested directly): the nat postrouting
base chains in the kernel's order, the first that translates the flow, and
the words.

The kernel runs the nat hook's base chains by priority, lowest first, and
stops at the first that sets a NAT binding (``nf_nat_inet_fn``): an
``accept`` or ``return`` in one base chain does not stop the next.  Between
base chains of equal priority (iptables' nat POSTROUTING, legacy and
iptables-nft, and ``srcnat`` nft chains are all at 100) the one registered
last runs first (``nf_hook_entries_grow`` puts a new hook before those of
its priority; the nat core keeps its nat chains the same way), and a chain
is registered when it is made: iptables-nft makes POSTROUTING when a rule
first needs it, a table replaced by delete and add is made again.  No
listing shows when (not the tables' order, not their handles: proven on
packets in tests/integration/test_snat_explain.py): where two of them would
translate the flow differently, the answer is ``unknown`` and says so.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.trace import follow
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.audit_view import View

OURS_WORD = 'ours'


def programs_of(findings, family, chain):
    """Every ``trace.Program`` of the findings (``backend.AuditFinding``)
    that acts on ``family``, in the order read; a table another finding
    shows too (its ``shows``) is left out, as the audit leaves it out
    (``View.tables``)."""
    found = []
    for _finding, tables in View.tables(findings, (family,)):
        for table in tables:
            if table.programs is None:
                continue
            found.extend(p for p in table.programs(chain) if family in p.families)
    return found


def _groups(programs):
    """The programs in the kernel's order: lists of equal priority, lowest first."""
    groups = []
    for program in sorted(programs, key=lambda p: p.priority):
        if groups and groups[-1][0].priority == program.priority:
            groups[-1].append(program)
        else:
            groups.append([program])
    return groups


def _owner(program, trace_, chain):
    if program.ours:
        return owners.OURS.name
    clues = trace_.clues
    if clues is None:
        return owners.UNKNOWN
    return owners.attribute(trace_.via, clues.cond, chain, clues.nft_table)


def _where(program):
    return {'backend': program.backend, 'table': program.table, 'base_chain': program.start,
            'priority': program.priority}


def _decided_by(program, trace_, chain):
    out = {'owner': _owner(program, trace_, chain), 'backend': program.backend, 'table': program.table,
           'chain': trace_.chain, 'rule': trace_.rule.text, 'position': trace_.rule.position}
    return out


def _effect(trace_):
    return (trace_.verdict, trace_.to)


def explain(programs, flow, chain):
    """The answer for ``flow`` (``trace.Flow``) through ``programs``: a dict
    with ``verdict``, ``to``, ``reason``, ``decided_by``, ``path``,
    ``chains`` (each base chain in order and what it did), ``candidates``
    (base chains of equal priority that disagree: what each would do) and
    ``msg``."""
    path = []
    chains = []
    result = {'verdict': 'unchanged', 'to': None, 'reason': None, 'decided_by': None, 'candidates': []}
    for group in _groups(programs):
        entering = flow.mark
        done = []
        for program in group:
            one = flow.copy()
            one.mark = entering
            trace_ = follow(program, one)
            where = _where(program)
            chains.append(dict(where, result=trace_.verdict or 'no NAT'))
            path.extend(dict(where, **step) for step in trace_.path)
            done.append((program, trace_, one))
        for _p, trace_, one in done:
            if one.mark != entering:
                flow.mark = one.mark
        deciding = [(p, t) for p, t, _o in done if t.verdict is not None]
        if not deciding:
            continue
        first_program, first = deciding[0]
        result['decided_by'] = _decided_by(first_program, first, chain)
        unknown = [(p, t) for p, t in deciding if t.verdict == 'unknown']
        if unknown:
            program, trace_ = unknown[0]
            result.update(verdict='unknown', decided_by=_decided_by(program, trace_, chain),
                          reason='%s, in %s %s chain %s rule %d' % (trace_.reason, program.backend, program.table,
                                                                    trace_.chain, trace_.rule.position))
        elif len(set(_effect(t) for _p, t in deciding)) > 1:
            names = ', '.join('%s %s %s' % (p.backend, p.table, p.start) for p, _t in deciding)
            result['candidates'] = [dict(verdict=t.verdict, to=t.to, decided_by=_decided_by(p, t, chain))
                                    for p, t in deciding]
            result.update(verdict='unknown', decided_by=None,
                          reason=('base chains of equal priority %d translate the flow differently (%s): the '
                                  'kernel runs the one registered last first, and no listing shows which that is'
                                  % (first_program.priority, names)))
        else:
            result.update(verdict=first.verdict, to=first.to)
            if len(deciding) > 1:
                result['reason'] = ('%d base chains of priority %d translate the flow alike; which of them runs '
                                    'first no listing shows' % (len(deciding), first_program.priority))
        break
    result['path'] = path
    result['chains'] = chains
    result['msg'] = message(flow, result, path)
    return result


def _jumped(path, decided):
    """The jump that led to the deciding rule's chain, in words, or ''."""
    for step in reversed(path):
        if step['action'] in ('jump', 'goto') and step['rule'] and decided and step['chain'] != decided['chain'] \
                and step['backend'] == decided['backend'] and step['table'] == decided['table']:
            verb = 'jumped' if step['action'] == 'jump' else 'went'
            return ', after %s rule %d %s there' % (step['chain'], step['position'], verb)
    return ''


def message(flow, result, path):
    """One line a person reads."""
    head = '%s → %s' % (flow.src, flow.dst)
    decided = result['decided_by']
    if result['verdict'] == 'unknown':
        return '%s: unknown: %s.' % (head, result['reason'])
    if result['verdict'] == 'unchanged':
        passed = len(set((s['backend'], s['table'], s['base_chain']) for s in path))
        return ('%s: leaves with its own source: no nat postrouting rule translates it (%d base chain%s passed).'
                % (head, passed, '' if passed == 1 else 's'))
    owner = decided['owner']
    who = OURS_WORD if owner == owners.OURS.name else owner
    what = 'MASQUERADE' if result['verdict'] == 'masquerade' else 'SNAT to %s' % result['to']
    return '%s: %s by %s (%s rule %d)%s.' % (head, what, who, decided['chain'], decided['position'],
                                             _jumped(path, decided))
