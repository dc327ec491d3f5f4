# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""flannel's masquerading: ``--ip-masq`` removed from flanneld's options
wherever they are written (unit, drop-ins, environment files), ipmasq=false
in mk-docker-opts.sh, and the FLANNEL-POSTRTG chain and its jump removed once
flanneld no longer masquerades (flanneld never removes them itself).

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import managed_unit, remove_nat_rules, restore, setup
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.envfile import env_value
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import check_abs, commit
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.goflags import bool_value, fix_flags, remove_arg, set_definition
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import RUNTIME_DIRS, command_lines, extra_definitions, load_unit, unit_variables

FLANNEL_CHAIN = 'FLANNEL-POSTRTG'
FLANNEL_COMMENT = 'flanneld masq'
_MK_IPMASQ = re.compile(r'^ipmasq=(["\']?)(true|false)\1[ \t]*(?:#.*)?$', re.M)


def flannel_rules(table, family):
    """``(rules, chains)`` to remove from a nat table
    (``iptables_save.NatTable``): every jump to FLANNEL-POSTRTG from
    POSTROUTING or carrying flannel's comment, POSTROUTING rules with
    flannel's comment (older flannel put them there), and the chain.
    A jump from elsewhere without flannel's comment is not ours to delete:
    error, nothing changed."""
    remove, foreign = [], []
    for chain, rules in table.chains.items():
        if chain == FLANNEL_CHAIN:
            continue
        for rule in rules:
            flannels = rule.comment == FLANNEL_COMMENT
            if rule.targets(FLANNEL_CHAIN):
                (remove if chain == 'POSTROUTING' or flannels else foreign).append(rule)
            elif chain == 'POSTROUTING' and flannels:
                remove.append(rule)
    drop = [FLANNEL_CHAIN] if FLANNEL_CHAIN in table.chains else []
    if foreign and drop:
        raise MasqError('cannot delete %s (IPv%d): rules that are not flannel\'s jump to it: %s. Remove them '
                        'first. Nothing was changed.' % (FLANNEL_CHAIN, family, '; '.join(r.line for r in foreign)))
    return remove, drop


def flannel_sync(params, run, find, writer, check_mode=False):
    """flanneld without --ip-masq, mk-docker-opts.sh with ipmasq=false, and
    FLANNEL-POSTRTG removed once flanneld no longer masquerades (or undo)."""
    p = params
    files, unit_dirs, env_files, backups, result = setup(p, 'flannel')
    result['flag_sources'] = []
    result['removed_rules'] = []
    result['stale_rules'] = []
    unit = managed_unit(files, p, unit_dirs, result, 'flannel')
    if unit is None:
        return result

    if p['state'] == 'absent':
        restore(files, backups, result, check_mode, writer, p['backup'])
        if result['edited']:
            result.msg('flanneld re-creates its own rules when it restarts with --ip-masq.')
        return result

    messages = []

    def load():
        # Also the ExecStart lines a drop-in overrides: --ip-masq goes from
        # every place it is written, so removing a drop-in cannot bring it back.
        u = load_unit(files, p['unit_name'], unit_dirs)
        commands, extra, _defs = command_lines(files, u, env_files, messages, include_overridden=True)
        return u, commands, extra

    def is_off(occ):
        return bool_value(occ.value) is False

    def drop(occ):
        remove_arg(files, occ)
        return 'removed %s' % occ.text()

    unit, commands, extra, occs = fix_flags(files, load, 'ip-masq', is_off, drop, result)
    for m in sorted(set(messages)):
        result.msg(m)
    result['flag_sources'] = [o.as_dict() for o in occs]
    masq_on = any(not is_off(o) for o in occs)
    if masq_on:
        result.warn('flanneld would still masquerade: %s cannot be edited here.'
                    % ', '.join('%s (%s)' % (o.text(), o.arg.describe()) for o in occs if not is_off(o)))

    # flanneld also reads FLANNELD_IP_MASQ when the flag is not on the command line.
    if not occs:
        defs = unit_variables(files, unit)
        defs.update(extra_definitions(files, env_files))
        d = defs.get('FLANNELD_IP_MASQ')
        if d is not None and d.value.strip() and bool_value(d.value.strip()) is not False:
            if d.path.startswith(RUNTIME_DIRS):
                result.warn('FLANNELD_IP_MASQ=%s comes from %s, a file generated at run time; not edited.'
                            % (d.value, d.path))
                masq_on = True
            else:
                set_definition(files, d, 'false')
                result.msg('%s: FLANNELD_IP_MASQ=%s set to false.' % (d.path, d.value))

    for path in p['mk_docker_opts']:
        path = check_abs(path, 'mk_docker_opts')
        text = files.read(path)
        if text is None:
            continue
        m = _MK_IPMASQ.search(text)
        if m is None:
            result.msg('%s has no top-level "ipmasq=" line; left as it is.' % path)
            continue
        if m.group(2) == 'true':
            files.replace(path, m.start(2), m.end(2), 'false')
            result.msg('%s: ipmasq=true set to false, so Docker gets no --ip-masq from flannel.' % path)
    result['ip_masq'] = masq_on

    commit(files, backups, result, check_mode, writer, p['backup'])
    result['restart_required'] = bool(result['edited'])

    if p['remove_stale_rules']:
        subnet_env = check_abs(p['subnet_env'], 'subnet_env')
        running = env_value(files.read(subnet_env), 'FLANNEL_IPMASQ')
        found = []

        def select(family, table):
            drop_rules, drop_chains = flannel_rules(table, family)
            found.extend('IPv%d: %s' % (family, r.line) for r in drop_rules)
            found.extend('IPv%d: chain %s' % (family, c) for c in drop_chains)
            if masq_on or result['restart_required'] or running == 'true':
                return [], []
            return drop_rules, drop_chains

        remove_nat_rules(run, find, select, check_mode, result)
        result['stale_rules'] = found
        if found and not result['removed_rules']:
            why = ('flanneld still runs with --ip-masq (%s says FLANNEL_IPMASQ=true); restart it first'
                   % subnet_env) if running == 'true' else 'flanneld must restart without --ip-masq first'
            result.msg('flannel\'s rules are left in place: %s, or it re-creates them.' % why)
    return result
