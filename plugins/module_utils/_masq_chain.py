# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``masq_chain`` module's run, callable from another module's process
(the role's ``ip_masq_node``): ``enforce(params, check_mode, diff, run, find)``.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.addresses import check_snat_local
from ansible_collections.ipmasq.agent.plugins.module_utils._core.backends import Backends, check_backend, diff_text
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import Policy, validate_chain_name

# The defaults of the module's options, for a caller that leaves some out.
DEFAULTS = {
    'nonmasquerade_cidrs': None, 'nomasq_all_reserved_ranges': False, 'masq_link_local': False,
    'masq_link_local_ipv6': False, 'ipv6': False, 'chain': 'IP-MASQ-AGENT', 'adopt_chain': False,
    'random_fully': None, 'to_ports': [], 'jump_position': 'append', 'cidr_limit': 64, 'rule_format': 'docs',
    'backend': 'auto', 'exception_cidrs': [], 'masquerade_cidrs': [], 'snat_to': [], 'snat_to_require_local': True,
    'source_cidrs': [], 'out_interfaces': [], 'state': 'present',
}

POLICY_OPTIONS = ('nonmasquerade_cidrs', 'nomasq_all_reserved_ranges', 'masq_link_local', 'masq_link_local_ipv6',
                  'ipv6', 'chain', 'random_fully', 'to_ports', 'jump_position', 'cidr_limit', 'rule_format',
                  'exception_cidrs', 'masquerade_cidrs', 'snat_to', 'snat_to_require_local', 'source_cidrs',
                  'out_interfaces')


def enforce(params, check_mode, diff, run, find):
    """Apply (or remove, ``state: absent``) the policy ``params`` describes
    (the module's options; missing keys take DEFAULTS). Returns the module's
    result dict, with ``diff`` (one before/after of our chains and table)
    when ``diff`` is true; raises MasqError before anything is written when
    the policy or the node's state is refused."""
    # Imported here: sync pulls in every backend, which a caller that only
    # validates does not need.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.sync import sync  # pylint: disable=import-outside-toplevel
    p = dict(DEFAULTS)
    p.update(params)
    policy = None
    if p['state'] == 'present':
        policy = Policy(**{key: p[key] for key in POLICY_OPTIONS})
        check_snat_local(policy)    # the node holds the snat_to addresses, before anything is read
    else:
        validate_chain_name(p['chain'])
    backends = Backends(run, find, choice=check_backend(p['backend']))
    result = sync(policy, backends, state=p['state'], check_mode=check_mode,
                  chain=p['chain'], adopt=p['adopt_chain'])
    if diff:
        result['diff'] = {'before': diff_text(result, 'before'), 'after': diff_text(result, 'after')}
    return result
