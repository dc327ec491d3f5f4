# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``snat_sources`` module's run, callable from another module's process
(the role's ``ip_masq_node``): ``inspect(params, check_mode, diff, run, find)``.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import DEFAULT_CHAIN
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.node import audit
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.report import offender_lines
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import audit_msg

# The module's argument spec (snat_sources, and the role's audit part), and its defaults.
SPEC = {
    'chain': {'type': 'str', 'default': DEFAULT_CHAIN},
    'ipv6': {'type': 'bool', 'default': False},
    'include_nft': {'type': 'str', 'choices': ['auto', 'always', 'never'], 'default': 'auto'},
    'allow': {'type': 'list', 'elements': 'raw', 'default': []},
    'on_offenders': {'type': 'str', 'choices': ['report', 'warn', 'fail'], 'default': 'report'},
    'advice': {'type': 'str', 'choices': ['module', 'role'], 'default': 'module'},
}
DEFAULTS = dict((name, entry['default']) for name, entry in SPEC.items())


def inspect(params, check_mode, diff, run, find):  # pylint: disable=unused-argument
    """Read every SNAT rule of the node (read-only, so the same in check
    mode) and judge it. Returns the module's result dict. Where ours is not
    the only SNAT, ``on_offenders: fail`` raises MasqError with one line per
    offender (what to do), ``warn`` adds those lines to ``warnings``."""
    p = dict(DEFAULTS)
    p.update(params)
    result = audit(run, find, chain=p['chain'], ipv6=p['ipv6'], include_nft=p['include_nft'], allow=p['allow'])
    problems = [] if result['only_ours'] else offender_lines(result, p['advice'], check_mode)
    if problems and p['on_offenders'] == 'fail':
        raise MasqError('%s %s' % (audit_msg(result), ' '.join(problems)), **result)
    if problems and p['on_offenders'] == 'warn':
        result['warnings'] = [audit_msg(result)] + problems
    result['msg'] = audit_msg(result)
    return result
