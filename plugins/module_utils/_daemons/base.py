# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What the three daemon modules (``docker_ip_masq``, ``flannel_ip_masq``,
``kubelet_nonmasq``) share: their result, the files and backups of a run,
bounded helper commands, and the removal of nat rules a daemon left behind:
one ``backend.RuleMatch`` over the backend registry, each backend planning
it in its own terms, under the writers' lock.

Standard library only: this file runs on managed nodes.
"""

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError, one_line
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.backends import Backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.sync import locked
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import Backups
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import DEFAULT_BACKUP_DIR, plan_restore
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import Files, check_abs, commit
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import DEFAULT_UNIT_DIRS, load_unit
from ansible_collections.ipmasq.agent.plugins.module_utils._files.writer import Writer
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import daemon_msg

CLI_TIMEOUT = 60
# The nft families of the daemons' tables, and the address family of each.
NFT_FAMILIES = {'ip': 4, 'ip6': 6}

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
        return result.module_result(check_mode=module.check_mode)
    return run


class Result:
    """What the three modules return."""

    def __init__(self, state, daemon):
        self.daemon = daemon
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

    def module_result(self, check_mode=False):
        """The dict a module exits with (``run_module`` passes the warnings on
        and keeps the diff in diff mode only), with its one-line ``msg``."""
        out = dict(self.data)
        out['msg'] = daemon_msg(self.daemon, out, check_mode)
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
    return files, unit_dirs, env_files, backups, Result(params['state'], owner)


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
    restoring = plan_restore(files, backups, result, semantic=semantic, check_mode=check_mode)
    commit(files, backups, result, check_mode, writer, backup, restoring)
    result['restart_required'] = bool(result['edited'])
    return result


def checked_params(where, options, given):
    """A daemon module's options ``given`` (a role's daemon step's ``edit``
    or ``cleanup``) checked against its argument spec (``COMMON_SPEC`` and
    its own ``options``), with its defaults; a bad one fails naming
    ``where`` (``daemons.docker``), before anything runs."""
    checked = ArgumentSpecValidator(argument_spec(**options)).validate(dict(given))
    if checked.error_messages:
        raise MasqError('%s: %s' % (where, '; '.join(checked.error_messages)))
    return checked.validated_parameters


def bounded(find, argv, seconds=CLI_TIMEOUT):
    """``argv`` under ``timeout`` (when the node has it), so a hanging helper
    (the docker CLI, kubelet --version) cannot hang the module."""
    timeout = find('timeout')
    if timeout:
        return [timeout, '--kill-after=5', str(seconds)] + list(argv)
    return list(argv)


def remove_rules(run, find, match, check_mode, result):
    """Remove what ``match`` (``backend.RuleMatch``: a daemon's rules, in
    each backend's terms) picks, from every registered backend that removes
    such rules, in the registry's order (``Backends.remove``: everything
    read and checked before the first write and under the writers' lock, a
    failed write read again once).  What was removed (or would be, in check
    mode) is appended to ``result['removed_rules']`` and returned.

    A backend whose tools are missing: a message; a reading it could not
    make: a warning; nothing removed there.  When a backend fails, the error
    says what the backends before it already removed.

    Each removal is read, planned and written by ``run.locked`` where
    ``run`` has one (``locked(read, plan, check_mode)``, as ``sync.locked``:
    the explanation's after mode, ``_explain/after.Projection``, writes the
    plan into the listings it projects, never the node, check mode too),
    else by ``sync.locked``, under the writers' lock."""
    result.data.setdefault('removed_rules', [])
    node = Backends(run, find)
    removed = []
    loop = getattr(run, 'locked', None) or locked
    for backend in node.cleaners(match):
        earlier = list(result['removed_rules'])
        try:
            done = node.remove(backend, match, check_mode, loop)
        except MasqError as e:
            if not earlier:
                raise
            details = dict(e.details, changed=True, removed_rules=earlier + list(e.details.get('removed_rules') or []))
            raise MasqError('%s Removed before it, and kept: %s.' % (e.msg.rstrip('.') + '.', '; '.join(earlier)),
                            **details)
        if done is None:
            result.msg(backend.missing_text())
            continue
        for note in backend.removal_notes(done.reading):
            result.warn(note)
        if done.retried is not None:
            result.msg('The nat table changed between the read and the write (a container torn down meanwhile?): '
                       'read again and removed what was left (%s).' % one_line(done.retried.msg))
        if done.actions:
            result['changed'] = True
            result['removed_rules'] = earlier + done.actions
            removed.extend(done.actions)
    return removed
