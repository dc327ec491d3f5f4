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

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import DEFAULT_CHAIN
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.result_words import did, plural


def _paths(paths, limit=3):
    shown = ', '.join(paths[:limit])
    return shown + (', ...' if len(paths) > limit else '')


def chain_msg(result, check_mode):
    """masq_chain: ``IP-MASQ-AGENT: IPv4 5 rules written (was 0), IPv6 not
    managed; backend iptables, auto: ...``; in check mode ``would write IPv4
    5 rules (was 0)``; ``IP-MASQ-AGENT: no change (IPv4 5 rules, IPv6 not
    managed)``.  Each backend says its own part
    (``backend.Backend.msg_parts``); a run that changes something (or would)
    ends with the backend that holds the policy and why that one
    (``selected_backend``, ``selected_backend_reason``), so that the one
    line is all a person running it ad hoc needs."""
    # Imported here: the other lines (and the action, on the controller) need no backend.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.backends import msg_parts  # pylint: disable=import-outside-toplevel

    present = result.get('state', 'present') == 'present'
    changed, steady = msg_parts(result, check_mode)
    chain = result.get('chain') or DEFAULT_CHAIN
    if not changed:
        return '%s: no change (%s)' % (chain, ', '.join(steady) or 'absent')
    why = ''
    if present and result.get('selected_backend'):
        reason = result.get('selected_backend_reason')
        why = '; backend %s%s' % (result['selected_backend'], ', %s' % reason if reason else '')
    return '%s: %s%s' % (chain, ', '.join(changed + (steady if present else [])), why)


def files_msg(result, check_mode):
    """node_files: ``2 files written (/etc/ip-masq-agent/config, ...)`` or ``no change (3 files)``."""
    items = result.get('files') or []
    written = [i['path'] for i in items if i['changed'] and i['state'] != 'absent']
    removed = [i['path'] for i in items if i['changed'] and i['state'] == 'absent']
    if not (written or removed):
        return 'no change (%s)' % plural(len(items), 'file')
    parts = []
    if written:
        parts.append(did(check_mode, plural(len(written), 'file'), 'written', 'write', ' (%s)' % _paths(written)))
    if removed:
        parts.append(did(check_mode, plural(len(removed), 'file'), 'removed', 'remove', ' (%s)' % _paths(removed)))
    return ', '.join(parts)


def code_msg(result, check_mode):
    """resync_code: ``resync code in PATH: 3 files written, 1 file removed, 1 earlier version
    removed (ROOT)``, ``removed`` (the whole tree, state absent) or ``no change``."""
    written, removed = result.get('written') or [], result.get('removed') or []
    roots = result.get('removed_roots') or []
    if not (written or removed or roots):
        return 'resync code in %s: no change' % result.get('path')
    if removed == [result.get('path')]:
        return 'resync code in %s: %s' % (result.get('path'), 'would be removed' if check_mode else 'removed')
    parts = []
    if written:
        parts.append(did(check_mode, plural(len(written), 'file'), 'written', 'write'))
    if removed:
        parts.append(did(check_mode, plural(len(removed), 'file'), 'removed', 'remove'))
    if roots:
        parts.append(did(check_mode, plural(len(roots), 'earlier version'), 'removed', 'remove', ' (%s)' % _paths(roots)))
    return 'resync code in %s: %s' % (result.get('path'), ', '.join(parts))


def daemon_msg(daemon, result, check_mode):
    """The daemon modules: ``docker: 1 file edited (/etc/docker/daemon.json), restart required`` or ``no change``."""
    if not result.get('installed'):
        return '%s: not installed, no change' % daemon
    parts = []
    edited = list(result.get('edited') or [])
    if edited:
        parts.append(did(check_mode, plural(len(edited), 'file'), 'edited', 'edit', ' (%s)' % _paths(edited)))
    removed = result.get('removed_rules') or []
    if removed:
        parts.append(did(check_mode, plural(len(removed), 'nat rule'), 'removed', 'remove'))
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
