# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``snat_explain`` module's run: ``explain(params, run, find)``.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import DEFAULT_CHAIN
from ansible_collections.ipmasq.agent.plugins.module_utils._explain import flow as flows
from ansible_collections.ipmasq.agent.plugins.module_utils._explain.node import read

# The module's argument spec.
SPEC = {
    'src': {'type': 'str', 'required': True},
    'dst': {'type': 'str', 'required': True},
    'proto': {'type': 'str'},
    'dport': {'type': 'str'},
    'out_interface': {'type': 'str'},
    'mark': {'type': 'str'},
    'chain': {'type': 'str', 'default': DEFAULT_CHAIN},
    'include_nft': {'type': 'str', 'choices': ['auto', 'always', 'never'], 'default': 'auto'},
    'after': {'type': 'dict'},
}

# What the answer now says, next to the answer after the role (after mode).
NOW_KEYS = ('verdict', 'to', 'reason', 'decided_by', 'msg')


def explain(params, run, find, proc_read=None):
    """The module's result for one flow; only reads (the same in check mode)."""
    flow = flows.parse(params['src'], params['dst'], params.get('proto'), params.get('dport'),
                       params.get('out_interface'), params.get('mark'))
    asked = {'src': str(flow.src), 'dst': str(flow.dst), 'proto': flow.proto, 'dport': flow.dport,
             'out_interface': flow.oif, 'mark': '0x%x' % flow.mark}
    chain = params.get('chain') or DEFAULT_CHAIN
    include_nft = params.get('include_nft') or 'auto'
    now = policy_msg = None
    notes = []
    if params.get('after') is not None:
        projection, policy_msg, notes, after_chain = project(params['after'], run, find)
        now = read(run, find, flow.family, chain=chain, include_nft=include_nft,
                   proc_read=proc_read).explain(flow.copy(), chain)
        # After the run, ours is the policy's chain.
        run, chain = projection, after_chain
    reading = read(run, find, flow.family, chain=chain, include_nft=include_nft, proc_read=proc_read)
    result = reading.explain(flow, chain)
    result['flow'] = asked
    result['after'] = now is not None
    result['now'] = dict((key, now[key]) for key in NOW_KEYS) if now is not None else None
    result['policy'] = policy_msg
    result['notes'].extend(notes)
    result['changed'] = False
    return result


def project(after, run, find):
    """A :class:`~_explain.after.Projection` of the node once the policy
    ``after`` (the role's node arguments: ``chain``, masq_chain's options,
    and ``allow_catch_all``; ``daemons``, the role's daemon steps) is
    applied, the policy run's message, notes, and the policy's chain name
    (ours, after the run)."""
    # Start-up cost: the projection is loaded only in after mode.
    from ansible_collections.ipmasq.agent.plugins.module_utils._explain.after import (  # pylint: disable=import-outside-toplevel
        Projection,
        checked_steps,
        daemon_steps,
        policy_writes,
    )
    # Start-up cost: the writers' core is loaded only in after mode.
    from ansible_collections.ipmasq.agent.plugins.module_utils._masq_chain import apply_checked, chain_params  # pylint: disable=import-outside-toplevel
    if not isinstance(after, dict) or not isinstance(after.get('chain'), dict):
        raise MasqError('after: give the policy as the role applies it: a dict with "chain" (the options of '
                        'ipmasq.agent.masq_chain) and optionally "allow_catch_all" and "daemons"; got %r.' % (after,))
    unknown = sorted(set(after) - set(['chain', 'allow_catch_all', 'daemons']))
    if unknown:
        raise MasqError('after: %s is not a key of after (chain, allow_catch_all, daemons).' % ', '.join(unknown))
    steps = [] if after.get('daemons') is None else after['daemons']
    if not isinstance(steps, list):
        raise MasqError('after.daemons: give the role\'s daemon steps as a list; got %r.' % (steps,))
    steps = checked_steps(steps)
    try:
        options, policy = chain_params(after['chain'], bool(after.get('allow_catch_all')))
    except MasqError as e:
        msg = e.msg.rstrip()
        if msg.endswith('Nothing was changed.'):
            msg = msg[:-len('Nothing was changed.')].rstrip()
        raise MasqError('after.%s%s' % ('' if msg.startswith('chain: ') else 'chain: ', msg))
    projection = Projection(run)
    result = apply_checked(options, policy, True, False, projection, find)
    notes = policy_writes(projection, result)
    # Then the daemons' steps, as the role runs them after its policy.
    notes.extend(daemon_steps(projection, steps, find))
    return projection, result.get('msg'), notes, options['chain']
