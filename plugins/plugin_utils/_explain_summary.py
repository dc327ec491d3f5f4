# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The SNAT explanation's answers on the controller.  The fleet form
(``playbooks/explain.yml``): the flow checked before any host is touched
(:func:`checked_flow`), and every host's answer summed up
(:func:`summary`): which hosts translate the flow, which do not, whose rule
decides on each, and the groups whose hosts' verdicts differ.  The role's
form (``ip_masq_explain_flows``): one host's answers to its flows kept as
the fact ``ip_masq_explain`` (:func:`flow_answers`)."""

from __future__ import annotations

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._explain import flow as flows

FLOW_KEYS = ('src', 'dst', 'proto', 'dport', 'out_interface', 'mark')
TRANSLATED = ('masquerade', 'snat')


class FlowError(ValueError):
    """A flow that is not one: the message names the key and the value."""


def checked_flow(given, ask=True):
    """The flow ``given`` (a dict of :data:`FLOW_KEYS`; empty values are
    left out) checked as the ``snat_explain`` module checks it, as the
    module's arguments (strings); FlowError naming the bad value (``key:
    ...`` where one key is bad).  ``ask``: a missing address says how the
    play takes it (``-e src=...``)."""
    if not isinstance(given, dict):
        raise FlowError('the flow must be a dict of %s, got %r.' % (', '.join(FLOW_KEYS), given))
    extra = sorted(k for k in given if k not in FLOW_KEYS)
    if extra:
        raise FlowError('%s is not a key of a flow (%s).' % (', '.join(extra), ', '.join(FLOW_KEYS)))
    args = dict((k, str(v).strip()) for k, v in given.items() if v is not None and str(v).strip() != '')
    for key in ('src', 'dst'):
        if key not in args:
            raise FlowError('%s: give the flow\'s %s address%s.'
                            % (key, 'source' if key == 'src' else 'destination', ' (-e %s=...)' % key if ask else ''))
    try:
        flows.parse(args['src'], args['dst'], args.get('proto'), args.get('dport'), args.get('out_interface'),
                    args.get('mark'))
    except MasqError as e:
        raise FlowError(e.msg) from None
    return args


def flow_answers(results, after=False):
    """``results``: the registered results of a ``snat_explain`` loop over
    flows (``failed_when: false``), in order; ``after``: whether they were
    asked in after mode (the role: in check mode).  ``{'flows': [...]}``,
    one answer per flow: its ``flow`` (the loop item), ``verdict``, ``to``,
    ``decided_by``, ``after``, ``now`` and ``msg`` as the module gave them;
    a flow the node could not answer has the verdict ``failed`` and a
    ``msg`` that says so with the module's message.  TypeError naming the
    bad value."""
    if not isinstance(results, list):
        raise TypeError('give the results of a snat_explain loop (a list), got %r.' % (results,))
    out = []
    for index, result in enumerate(results):
        if not isinstance(result, dict):
            raise TypeError('result %d is not a dict: %r.' % (index, result))
        loop_var = result.get('ansible_loop_var', 'item')
        if not isinstance(result.get(loop_var), dict):
            raise TypeError('result %d carries no flow (a dict) as its loop item (%s): %r.' % (index, loop_var, result))
        flow = result[loop_var]
        if 'verdict' in result:
            out.append({'flow': flow, 'verdict': result['verdict'], 'to': result.get('to'),
                        'decided_by': result.get('decided_by'), 'after': result.get('after'),
                        'now': result.get('now'), 'msg': result.get('msg')})
            continue
        out.append({'flow': flow, 'verdict': 'failed', 'to': None, 'decided_by': None, 'after': after, 'now': None,
                    'msg': '%s -> %s: could not explain: %s' % (flow.get('src'), flow.get('dst'),
                                                                result.get('msg') or 'no message')})
    return {'flows': out}


def _decider(decided):
    if not decided:
        return None
    return '%s (%s %s chain %s rule %s)' % tuple(decided.get(key) for key in ('owner', 'backend', 'table', 'chain',
                                                                              'position'))


def _host(result):
    """One host's line of the summary from its registered snat_explain result."""
    if not isinstance(result, dict) or not result:
        return {'verdict': 'no answer', 'to': None, 'decided_by': None, 'rule': None,
                'msg': 'no answer (the host was not asked)'}
    if result.get('unreachable'):
        return {'verdict': 'unreachable', 'to': None, 'decided_by': None, 'rule': None,
                'msg': 'unreachable: %s' % (result.get('msg') or '').strip()}
    if result.get('failed') or 'verdict' not in result:
        return {'verdict': 'failed', 'to': None, 'decided_by': None, 'rule': None,
                'msg': 'failed: %s' % (result.get('msg') or '').strip()}
    decided = result.get('decided_by') or None
    out = {'verdict': result['verdict'], 'to': result.get('to'), 'decided_by': _decider(decided),
           'rule': decided.get('rule') if decided else None, 'msg': result.get('msg')}
    if result.get('after'):
        now = result.get('now') or {}
        out['now'] = {'verdict': now.get('verdict'), 'to': now.get('to'),
                      'decided_by': _decider(now.get('decided_by')), 'msg': now.get('msg')}
    return out


def _effect(host):
    return host['verdict'] if host['verdict'] != 'snat' else 'snat to %s' % host['to']


def summary(results, host_groups=None, skip_groups=('all', 'ungrouped', 'ip_masq_nodes')):
    """``results``: host -> its registered ``snat_explain`` result (or a
    failed/unreachable one); ``host_groups``: host -> the inventory groups
    it is in (``group_names``).  The fleet's answer: ``hosts`` (each host's
    verdict, ``to``, ``decided_by`` in words, the deciding ``rule``,
    ``msg``, and ``now`` in after mode), ``translated_hosts``,
    ``unchanged_hosts``, ``unknown_hosts``, ``failed_hosts``,
    ``deciders`` (who decides -> hosts), ``groups`` (per group: effect ->
    hosts), ``disagreeing_groups`` (the groups whose hosts' effects differ,
    with them) and ``lines`` (the summary in words)."""
    host_groups = host_groups or {}
    hosts = dict((name, _host(result)) for name, result in sorted(results.items()))
    deciders = {}
    for name, host in hosts.items():
        if host['verdict'] in TRANSLATED or host['verdict'] == 'unknown':
            deciders.setdefault(host['decided_by'] or 'several base chains of equal priority', []).append(name)
    groups = {}
    for name in hosts:
        for group in host_groups.get(name) or []:
            if group not in skip_groups:
                groups.setdefault(group, {}).setdefault(_effect(hosts[name]), []).append(name)
    disagreeing = dict((g, effects) for g, effects in sorted(groups.items()) if len(effects) > 1)
    out = {
        'hosts': hosts,
        'translated_hosts': [n for n, h in hosts.items() if h['verdict'] in TRANSLATED],
        'unchanged_hosts': [n for n, h in hosts.items() if h['verdict'] == 'unchanged'],
        'unknown_hosts': [n for n, h in hosts.items() if h['verdict'] == 'unknown'],
        'failed_hosts': [n for n, h in hosts.items() if h['verdict'] in ('failed', 'unreachable', 'no answer')],
        'deciders': deciders,
        'groups': dict(sorted(groups.items())),
        'disagreeing_groups': disagreeing,
    }
    out['lines'] = _lines(out)
    return out


def _names(names):
    return ', '.join(names) if names else 'none'


def _lines(out):
    lines = ['translate the flow (masquerade or snat): %s' % _names(out['translated_hosts']),
             'leave its source unchanged: %s' % _names(out['unchanged_hosts'])]
    if out['unknown_hosts']:
        lines.append('unknown (a match that cannot be evaluated, named per host): %s' % _names(out['unknown_hosts']))
    if out['failed_hosts']:
        lines.append('no answer: %s' % _names(out['failed_hosts']))
    for decider, names in sorted(out['deciders'].items()):
        lines.append('decided by %s: %s' % (decider, _names(names)))
    for name, host in out['hosts'].items():
        line = '%s: %s' % (name, host['msg'])
        if 'now' in host:
            line += ' (now: %s)' % host['now']['msg']
        lines.append(line)
    for group, effects in out['disagreeing_groups'].items():
        lines.append('group %s disagrees: %s' % (group, '; '.join('%s on %s' % (effect, _names(names))
                                                                  for effect, names in sorted(effects.items()))))
    if not out['disagreeing_groups']:
        lines.append('every group agrees within itself')
    return lines
