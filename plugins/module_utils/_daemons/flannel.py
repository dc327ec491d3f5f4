# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""flannel's masquerading: ``--ip-masq`` removed from flanneld's options
wherever they are written (unit, drop-ins, environment files), ipmasq=false
in mk-docker-opts.sh, and, once flanneld no longer masquerades, what it
masqueraded with: the FLANNEL-POSTRTG chain and its jump (iptables), and in
nftables mode the ``postrtg`` chain of its tables ``ip flannel-ipv4`` and
``ip6 flannel-ipv6`` (flanneld never removes these while it runs).

Why the chain, and not the rules or the whole table: flanneld
(pkg/trafficmngr/nftables) creates ``postrtg`` only with ``--ip-masq``
(``add chain``, ``flush chain``, then its rules, so it re-creates the chain
as it wants it whether or not it exists), and every rule in it serves
masquerading only (the returns before the masquerades).  The table also
holds the ``forward`` chain flanneld writes without ``--ip-masq``, which it
does not write again until it restarts; and flanneld's shutdown deletes
``flannel-ipv4`` then ``flannel-ipv6``, stopping at the first that is
missing.  So the table stays, the chain goes: what a flanneld started
without ``--ip-masq`` would have left.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import RuleMatch
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import (
    NFT_FAMILIES,
    managed_unit,
    remove_rules,
    restore,
    setup,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.envfile import env_value
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import check_abs, commit
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.flannel_names import (
    FLANNEL_CHAIN,
    FLANNEL_COMMENT,
    FLANNEL_NFT_CHAIN,
    FLANNEL_NFT_TABLES,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.goflags import bool_value, fix_flags, remove_arg, set_definition
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import RUNTIME_DIRS, command_lines, extra_definitions, load_unit, unit_variables

_MK_IPMASQ = re.compile(r'^ipmasq=(["\']?)(true|false)\1[ \t]*(?:#.*)?$', re.M)
# Where flannel's mk-docker-opts.sh is installed (the module's default for mk_docker_opts).
MK_DOCKER_OPTS = (
    '/usr/libexec/flannel/mk-docker-opts.sh',
    '/opt/bin/mk-docker-opts.sh',
    '/usr/local/bin/mk-docker-opts.sh',
    '/usr/bin/mk-docker-opts.sh',
)


# The module's own options (its argument spec beside base.COMMON_SPEC): the
# module and ip_masq_node's daemons part build the same parameters from them.
FLANNEL_OPTIONS = dict(
    unit_name=dict(type='str', default='flanneld.service'),
    mk_docker_opts=dict(type='list', elements='path', default=list(MK_DOCKER_OPTS)),
    subnet_env=dict(type='path', default='/run/flannel/subnet.env'),
    remove_stale_rules=dict(type='bool', default=True),
)


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


def flannel_nft_chains(tables, notes=None):
    """flannel's masquerading in nftables mode (``tables`` as
    ``NftTools.ruleset`` reads them): the chain ``postrtg`` of ``ip
    flannel-ipv4`` and ``ip6 flannel-ipv6``, a nat postrouting base chain.
    Returns ``[(text, what)]``, the ``nft`` part of a ``backend.RuleMatch``:
    the chain (with how many rules, how many of them masquerade), which the
    backend flushes and deletes in one transaction.  A ``postrtg`` that is not a nat postrouting base
    chain is not what flanneld writes: left alone, with a line in ``notes``."""
    out = []
    for family, name in FLANNEL_NFT_TABLES:
        table = tables.get((family, name))
        if table is None or FLANNEL_NFT_CHAIN not in table.chains:
            continue
        chain = table.chains[FLANNEL_NFT_CHAIN]
        where = '%s %s' % (family, name)
        if (chain.get('type'), chain.get('hook')) != ('nat', 'postrouting'):
            if notes is not None:
                notes.append('%s: chain %s is not a nat postrouting chain (type %s, hook %s), not what flanneld '
                             'writes; left alone.' % (where, FLANNEL_NFT_CHAIN, chain.get('type'), chain.get('hook')))
            continue
        rules = table.rules.get(FLANNEL_NFT_CHAIN, [])
        masq = [r for r in rules if any(isinstance(s, dict) and 'masquerade' in s for s in r.get('expr') or [])]
        text = 'IPv%d: %s: chain %s (%d rule%s, %d masquerading)' % (
            NFT_FAMILIES[family], where, FLANNEL_NFT_CHAIN, len(rules), '' if len(rules) == 1 else 's', len(masq))
        out.append((text, ('chain', family, name, FLANNEL_NFT_CHAIN)))
    return out


def flannel_sync(params, run, find, writer, check_mode=False, restarted=False):
    """flanneld without --ip-masq, mk-docker-opts.sh with ipmasq=false, and
    FLANNEL-POSTRTG removed once flanneld no longer masquerades (or undo).
    ``restarted``: the clean-up as after the role's restart of flanneld
    (``flannel_daemon.restarted``), for the explanation's after mode."""
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
        pending = result['restart_required']
        if restarted:
            # As after the role's restart: flanneld runs with the options this run's edit writes and says so in
            # subnet.env (FLANNEL_IPMASQ); no restart pending.
            running, pending = ('true' if masq_on else 'false'), False
            result['after_restart'] = (
                'after the restart flanneld still masquerades (an --ip-masq left on), so its rules stay' if masq_on
                else 'after the restart without --ip-masq, flanneld writes FLANNEL_IPMASQ=false to %s and no longer '
                     'masquerades, and the clean-up after it removes what it masqueraded with; the pods its CNI '
                     'plugin starts later follow the CNI step' % subnet_env)
        found = []
        notes = []
        keep = masq_on or pending or running == 'true'

        def select(family, table):
            drop_rules, drop_chains = flannel_rules(table, family)
            found.extend('IPv%d: %s' % (family, r.line) for r in drop_rules)
            found.extend('IPv%d: chain %s' % (family, c) for c in drop_chains)
            if keep:
                return [], []
            return drop_rules, drop_chains

        def pick(tables):
            chains = flannel_nft_chains(tables, notes)
            found.extend(text for text, _what in chains)
            return [] if keep else chains

        remove_rules(run, find, RuleMatch(nat=select, nft=pick), check_mode, result)
        for note in notes:
            result.msg(note)
        result['stale_rules'] = found
        if found and not result['removed_rules']:
            why = ('flanneld still runs with --ip-masq (%s says FLANNEL_IPMASQ=true); restart it first'
                   % subnet_env) if running == 'true' else 'flanneld must restart without --ip-masq first'
            result.msg('flannel\'s rules are left in place: %s, or it re-creates them.' % why)
    return result
