# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What the three daemon modules (``docker_ip_masq``, ``flannel_ip_masq``,
``kubelet_nonmasq``) share: their result, the files and backups of a run,
bounded helper commands, and the removal of nat rules a daemon left behind
(through the core's iptables backend, under the writers' lock).

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables import IptablesBackend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.sync import locked
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import Backups
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import DEFAULT_BACKUP_DIR, plan_restore
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import Files, Writer, check_abs, commit
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import DEFAULT_UNIT_DIRS, load_unit

CLI_TIMEOUT = 60

# The argument spec of the options every daemon module has (documented in
# doc_fragments/daemon_files.py, and per module for state and env_files).
COMMON_SPEC = dict(
    state=dict(type='str', choices=['present', 'absent'], default='present'),
    unit_dirs=dict(type='list', elements='path', default=list(DEFAULT_UNIT_DIRS)),
    env_files=dict(type='list', elements='path', default=[]),
    backup_dir=dict(type='path', default=DEFAULT_BACKUP_DIR),
    backup=dict(type='bool', default=True),
    root=dict(type='path', default='/'),
)


def argument_spec(**own):
    """COMMON_SPEC plus a module's own options."""
    spec = dict((k, dict(v)) for k, v in COMMON_SPEC.items())
    spec.update(own)
    return spec


def work(sync):
    """``run_module``'s work for a daemon module's ``sync(params, run, find, writer, check_mode)``."""
    def run(module, run_cmd, find):
        result = sync(module.params, run_cmd, find, Writer(module), check_mode=module.check_mode)
        return result.module_result()
    return run


class Result:
    """What the three modules return."""

    def __init__(self, state):
        self.data = {'changed': False, 'installed': False, 'state': state, 'restart_required': False,
                     'edited': [], 'backups': [], 'messages': []}
        self.warnings = []
        self.diff = []

    def __getitem__(self, key):
        return self.data[key]

    def __setitem__(self, key, value):
        self.data[key] = value

    def msg(self, text):
        self.data['messages'].append(text)

    def warn(self, text):
        self.warnings.append(text)
        self.data['messages'].append(text)

    def module_result(self):
        """The dict a module exits with (``run_module`` passes the warnings on
        and keeps the diff in diff mode only)."""
        out = dict(self.data)
        out['warnings'] = self.warnings
        out['diff'] = self.diff
        return out


def setup(params, owner):
    """``(files, unit_dirs, env_files, backups, result)`` of one module run."""
    files = Files(params.get('root') or '/')
    unit_dirs = [check_abs(d, 'unit_dirs') for d in params['unit_dirs']]
    if not unit_dirs:
        raise MasqError('unit_dirs: give at least one directory.')
    env_files = [check_abs(p, 'env_files') for p in params.get('env_files') or []]
    backups = Backups(files, params['backup_dir'], owner)
    return files, unit_dirs, env_files, backups, Result(params['state'])


def managed_unit(files, params, unit_dirs, result, daemon):
    """The daemon's unit, recorded in ``result``; None (with a message) when it
    is not installed or masked: then nothing is managed."""
    unit = load_unit(files, params['unit_name'], unit_dirs)
    if unit is None or unit.masked:
        result.msg('%s is %s; %s is not managed.' % (params['unit_name'], 'masked' if unit else 'not installed', daemon))
        return None
    result['installed'] = True
    result['unit'] = unit.fragment
    result['unit_files'] = unit.files
    return unit


def restore(files, backups, result, check_mode, writer, backup, semantic=None):
    """state=absent: every file this module edited back from its original."""
    restoring = plan_restore(files, backups, result, semantic=semantic)
    commit(files, backups, result, check_mode, writer, backup, restoring)
    result['restart_required'] = bool(result['edited'])
    return result


def bounded(find, argv, seconds=CLI_TIMEOUT):
    """``argv`` under ``timeout`` (when the node has it), so a hanging helper
    (the docker CLI, kubelet --version) cannot hang the module."""
    timeout = find('timeout')
    if timeout:
        return [timeout, '--kill-after=5', str(seconds)] + list(argv)
    return list(argv)


def remove_nat_rules(run, find, select, check_mode, result):
    """Delete what ``select(family, table) -> (rules, chains)`` picks from
    each family's nat table (``iptables_save.NatTable``), in one
    ``iptables-restore --noflush`` per family, everything read and checked
    before the first write and under the writers' lock."""
    backend = IptablesBackend(run, find)
    if not backend.tools[4].available:
        result.msg('iptables-save/iptables-restore not found; no rules checked.')
        result['removed_rules'] = []
        return []
    read, plan = backend.removal(select)
    _reading, todo = locked(read, plan, check_mode=check_mode)
    removed = todo.actions
    if removed:
        result['changed'] = True
    result['removed_rules'] = removed
    return removed
