# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``snat_explain`` module's run: ``explain(params, run, find)``.

Standard library only: this file runs on managed nodes.
"""

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
        # Start-up cost: the writers' core is loaded only in after mode.
        from ansible_collections.ipmasq.agent.plugins.module_utils._explain.after import project  # pylint: disable=import-outside-toplevel
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
