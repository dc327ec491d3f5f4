# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one-line ``msg`` of every module's result (and of the role's
action): what changed, per family or file, or "no change"; in check mode
what the run would do. Each module builds its result in one place and calls
the function here for its line.

Standard library only: this file runs on managed nodes (the action imports
it on the controller).
"""

FAMILIES = (('ipv4', 'IPv4'), ('ipv6', 'IPv6'))


def _plural(count, word):
    return '%d %s%s' % (count, word, '' if count == 1 else 's')


def _did(check_mode, what, done, would, extra=''):
    """``IPv4 5 rules written (was 0)`` or, in check mode, ``would write IPv4 5 rules (was 0)``."""
    if check_mode:
        return 'would %s %s%s' % (would, what, extra)
    return '%s %s%s' % (what, done, extra)


def _paths(paths, limit=3):
    shown = ', '.join(paths[:limit])
    return shown + (', ...' if len(paths) > limit else '')


def chain_msg(result, check_mode):
    """masq_chain: ``IP-MASQ-AGENT: IPv4 5 rules written (was 0), IPv6 not managed``;
    in check mode ``would write IPv4 5 rules (was 0)``; ``IP-MASQ-AGENT: no
    change (IPv4 5 rules, IPv6 not managed)``."""
    present = result.get('state', 'present') == 'present'
    nft = result.get('nftables') or {}
    changed, steady = [], []
    for key, name in FAMILIES:
        side = result.get(key) or {}
        rules = len(side.get('rules') or [])
        if side.get('managed') and present:
            if side.get('changed'):
                was = len((side.get('before') or {}).get('rules') or [])
                changed.append(_did(check_mode, '%s %s' % (name, _plural(rules, 'rule')), 'written', 'write',
                                    ' (was %d)' % was))
            else:
                steady.append('%s %s' % (name, _plural(rules, 'rule')))
        elif side.get('changed'):
            changed.append(_did(check_mode, '%s chain' % name, 'removed', 'remove'))
        elif not nft.get('managed'):
            steady.append(('%s not managed' if present else '%s absent') % name)
    table = 'nftables ' + (nft.get('table') or 'table')
    if nft.get('changed'):
        if nft.get('managed') and present:
            changed.append(_did(check_mode, table, 'written', 'write'))
        else:
            changed.append(_did(check_mode, table, 'removed', 'remove'))
    elif nft.get('managed'):
        steady.append('%s in place' % table)
    # Ours under another chain name (a renamed chain), removed in the same run.
    for key, name in FAMILIES:
        for other in (result.get(key) or {}).get('others') or []:
            changed.append(_did(check_mode, '%s old chain %s' % (name, other.get('chain')), 'removed', 'remove'))
    for other in nft.get('others') or []:
        changed.append(_did(check_mode, 'old nftables %s' % other.get('table'), 'removed', 'remove'))
    for other in result.get('other_iptables') or []:
        if other.get('changed'):
            changed.append(_did(check_mode, 'IPv%s ours in %s' % (other.get('family'), other.get('tools')),
                                'removed', 'remove'))
    chain = result.get('chain') or 'IP-MASQ-AGENT'
    if not changed:
        return '%s: no change (%s)' % (chain, ', '.join(steady) or 'absent')
    return '%s: %s' % (chain, ', '.join(changed + (steady if present else [])))


def files_msg(result, check_mode):
    """node_files: ``2 files written (/etc/ip-masq-agent/config, ...)`` or ``no change (3 files)``."""
    items = result.get('files') or []
    written = [i['path'] for i in items if i['changed'] and i['state'] != 'absent']
    removed = [i['path'] for i in items if i['changed'] and i['state'] == 'absent']
    if not (written or removed):
        return 'no change (%s)' % _plural(len(items), 'file')
    parts = []
    if written:
        parts.append(_did(check_mode, _plural(len(written), 'file'), 'written', 'write', ' (%s)' % _paths(written)))
    if removed:
        parts.append(_did(check_mode, _plural(len(removed), 'file'), 'removed', 'remove', ' (%s)' % _paths(removed)))
    return ', '.join(parts)


def code_msg(result, check_mode):
    """resync_code: ``resync code in PATH: 3 files written, 1 file removed``, ``removed`` (the
    whole tree, state absent) or ``no change``."""
    written, removed = result.get('written') or [], result.get('removed') or []
    if not (written or removed):
        return 'resync code in %s: no change' % result.get('path')
    if removed == [result.get('path')]:
        return 'resync code in %s: %s' % (result.get('path'), 'would be removed' if check_mode else 'removed')
    parts = []
    if written:
        parts.append(_did(check_mode, _plural(len(written), 'file'), 'written', 'write'))
    if removed:
        parts.append(_did(check_mode, _plural(len(removed), 'file'), 'removed', 'remove'))
    return 'resync code in %s: %s' % (result.get('path'), ', '.join(parts))


def daemon_msg(daemon, result, check_mode):
    """The daemon modules: ``docker: 1 file edited (/etc/docker/daemon.json), restart required`` or ``no change``."""
    if not result.get('installed'):
        return '%s: not installed, no change' % daemon
    parts = []
    edited = list(result.get('edited') or [])
    if edited:
        parts.append(_did(check_mode, _plural(len(edited), 'file'), 'edited', 'edit', ' (%s)' % _paths(edited)))
    removed = result.get('removed_rules') or []
    if removed:
        parts.append(_did(check_mode, _plural(len(removed), 'nat rule'), 'removed', 'remove'))
    if not parts and result.get('changed'):
        parts.append('changed' if not check_mode else 'would change')
    if not parts:
        return '%s: no change' % daemon
    if result.get('restart_required'):
        parts.append('restart required')
    return '%s: %s' % (daemon, ', '.join(parts))


def audit_msg(result):
    """snat_sources (read-only): the audit's one-line summary."""
    return 'SNAT audit: %s' % result.get('summary')


PART_NAMES = (('files', 'files'), ('resync_code', 'resync code'), ('chain', 'chain'), ('daemon', 'daemon'))


def node_msg(result, check_mode):
    """ip_masq_node: each part that changed, in its own words, or ``no change``."""
    changed = [(result.get(key) or {}).get('msg') for key, _name in PART_NAMES
               if (result.get(key) or {}).get('changed')]
    if result.get('daemon_reloaded') and changed:
        changed.append('systemd %s' % ('would be reloaded' if check_mode else 'reloaded'))
    if not changed:
        return 'no change'
    return '; '.join(m for m in changed if m)


def role_msg(node, steps, check_mode):
    """The ip_masq action: what the node run changed (or would) and the role's steps that follow."""
    text = node.get('msg') or 'no change'
    if steps:
        text += '; %s: %s' % ('the role would then run' if check_mode else 'the role then runs', ', '.join(steps))
    return text
