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

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.addresses import check_snat_local
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.cidrs import guard_nonmasq_cidrs
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.backends import Backends, check_backend, diff_text
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy, validate_chain_name
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import chain_msg


def checked(params):
    """``(options, policy)``: the options with DEFAULTS for those left out,
    and the Policy they make (None for ``state: absent``, whose chain name
    is checked); raises MasqError naming the option when refused."""
    p = dict(options.DEFAULTS)
    p.update(params)
    if p['state'] != 'present':
        validate_chain_name(p['chain'])
        return p, None
    return p, Policy(**{key: p[key] for key in options.POLICY_OPTIONS})


def enforce(params, check_mode, diff, run, find):
    """Apply (or remove, ``state: absent``) the policy ``params`` describes
    (the module's options; missing keys take DEFAULTS). Returns the module's
    result dict, with ``diff`` (one before/after of our chains and table)
    when ``diff`` is true; raises MasqError before anything is written when
    the policy or the node's state is refused."""
    p, policy = checked(params)
    return apply_checked(p, policy, check_mode, diff, run, find)


def apply_checked(p, policy, check_mode, diff, run, find):
    """:func:`enforce` for options and a policy that :func:`checked` made
    already (a caller that checks before anything else is written builds the
    Policy once)."""
    # Imported here: sync pulls in every backend, which a caller that only
    # validates does not need.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.sync import sync  # pylint: disable=import-outside-toplevel
    if policy is not None:
        check_snat_local(policy)    # the node holds the snat_to addresses, before anything is read
    backends = Backends(run, find, choice=check_backend(p['backend']))
    result = sync(policy, backends, state=p['state'], check_mode=check_mode,
                  chain=p['chain'], adopt=p['adopt_chain'])
    result['msg'] = chain_msg(result, check_mode)
    if diff:
        result['diff'] = {'before': diff_text(result, 'before'), 'after': diff_text(result, 'after')}
    return result


def chain_params(given, allow_catch_all=False):
    """The options of a policy the role applies (``ip_masq_node``'s
    ``chain`` part, ``snat_explain``'s ``after.chain``) typed by masq_chain's
    own spec (the options table) and checked by the core as masq_chain
    checks them, and its CIDR lists as the role's controller checks them,
    before any part of the run writes anything: a string never reaches a
    boolean. Returns ``(options, policy)`` as :func:`checked` makes them:
    the caller applies that policy, built once."""
    result = ArgumentSpecValidator(options.module_spec()).validate(dict(given))
    if result.error_messages:
        raise MasqError('chain: %s. Nothing was changed.' % '; '.join(result.error_messages), failed_part='chain')
    params = result.validated_parameters
    try:
        if params['state'] == 'present':
            if params['nonmasquerade_cidrs'] is not None:
                guard_nonmasq_cidrs(params['nonmasquerade_cidrs'], allow_catch_all=allow_catch_all,
                                    keep_duplicates=params['rule_format'] == 'upstream')
            for name in ('exception_cidrs', 'masquerade_cidrs', 'source_cidrs'):
                guard_nonmasq_cidrs(params[name], allow_catch_all=True, name=name)
        return checked(params)
    except MasqError as e:
        msg = e.msg.rstrip()
        raise MasqError(msg if msg.endswith('Nothing was changed.') else msg + ' Nothing was changed.',
                        failed_part='chain') from None
