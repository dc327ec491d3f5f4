# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The explanation "after the role": the node's nat listings as they will
be once this host's policy is applied, without writing anything.

The policy part of the role (``ip_masq_node``'s ``chain``: masq_chain's
options, typed and checked as that module checks them) runs through the
same core as a real run (``_masq_chain.apply_checked``), in check mode: it
only reads and plans.  Its plan is what the real run would write: per
family the ``iptables-restore --noflush`` input, and for nftables the
``nft -j -f -`` transaction.  :class:`Projection` has each registered
backend apply them to its listings the explanation reads, in memory, each
time they are read (``Backend.after_run``): the explanation then reads the
node as the role leaves it.  ``_snat_explain.project`` makes the run.

The role's daemon steps (``ip_masq_node``'s ``daemon``: each daemon's
module with the options of its edit, then of its clean-up) run the same
way (:func:`daemon_steps`): each module in check mode, the rules its
clean-up removes (``_daemons/base.remove_rules``, one ``RuleMatch`` per
daemon, the same as a real run's) written into the projection, not the
node (``Backend.after_write``).  Where the role restarts the daemon between
the edit and the clean-up, the clean-up runs as after that restart (the
daemon's ``restarted``, in its own file: the daemon then runs with the
settings the edit writes), and the notes say what that assumes.  What a
step changes only in a file otherwise, for a restart not foreseen or for
new containers, is not: the notes say so.

Only the writes a plan makes are applied; one this file cannot apply is an
error naming it, never a guess.

Standard library only: this file runs on managed nodes.
"""

import contextlib

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import sync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends


class Projection:
    """``run`` as the explanation's reads see the node after the role: each
    registered backend answers its own commands with the policy runs
    ``results`` (masq_chain results, check mode) applied to its listings
    (``Backend.after_run``); another command runs as it is when it sends
    nothing on stdin.  A write is refused (the explanation only reads),
    but while ``writable`` (a daemon's clean-up, :func:`daemon_steps`) a
    backend's write is recorded as a result (``Backend.after_write``) and
    applied, in memory, like the policy's, through :meth:`locked`, which
    ``_daemons/base.remove_rules`` takes from its ``run``."""

    def __init__(self, run, results=()):
        self.run = run
        self.results = list(results)
        self.writable = False

    def __call__(self, argv, data=None):
        tool = argv[0].rsplit('/', 1)[-1] if argv else ''
        if data is not None and self.writable:
            for backend in backends.REGISTRY:
                wrote = backend.after_write(tool, argv, data, self.run)
                if wrote is not None:
                    self.results.append(wrote)
                    return 0, '', ''
        for backend in backends.REGISTRY:
            answer = backend.after_run(tool, argv, data, self.results, self.run)
            if answer is not None:
                return answer
        if data is not None:
            raise MasqError('internal error: after mode refused to run %r (it only reads).' % (argv,))
        return self.run(argv)

    def locked(self, read, plan, check_mode=False):
        """A daemon's clean-up's read -> plan -> write here (``sync.locked``'s
        terms; ``_daemons/base.remove_rules`` takes it as ``run.locked``): the
        plan is written into this projection even in check mode, in which
        the daemon's module runs (nothing of it reaches the node), so the
        explanation sees what the clean-up leaves; and under no lock, as
        the node is only read.  A write that fails is not read again (in
        memory nothing can have changed meanwhile)."""
        del check_mode      # the module's: these writes are in memory
        return sync.locked(read, plan, lock=contextlib.nullcontext())


def policy_writes(projection, result):
    """Add a policy run's ``result`` (``_masq_chain.apply_checked`` in check
    mode) to ``projection``; notes on what it would write that the answer
    does not show."""
    projection.results.append(result)
    return [note for backend in backends.REGISTRY for note in backend.after_notes(result)]


def _step(index, step):
    """One daemon step of the role (``after.daemons[index]``): ``(daemon,
    sync, edit, cleanup, manage)``, its options checked as the node run
    checks them; a bad one fails naming it."""
    # Start-up cost: the daemons are loaded only in after mode with daemons.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry  # pylint: disable=import-outside-toplevel
    # Start-up cost, likewise: the daemons' module code.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import checked_params  # pylint: disable=import-outside-toplevel
    where = 'after.daemons[%d]' % index
    if not isinstance(step, dict) or not isinstance(step.get('name'), str):
        raise MasqError('%s: give a daemon step as the role makes it (a dict with name, edit, cleanup and manage); '
                        'got %r.' % (where, step))
    unknown = sorted(set(step) - set(['name', 'edit', 'cleanup', 'manage']))
    if unknown:
        raise MasqError('%s: %s is not a key of a daemon step (name, edit, cleanup, manage).' % (where, ', '.join(unknown)))
    try:
        daemon = registry.daemon(step['name'])
    except KeyError:
        raise MasqError('%s.name: %r is not a daemon of the registry (%s).'
                        % (where, step['name'], ', '.join(registry.names()))) from None
    options, sync = daemon.editor()
    where = 'after.daemons.%s' % daemon.name
    for key in ('edit', 'cleanup'):
        if step.get(key) is not None and not isinstance(step[key], dict):
            raise MasqError('%s.%s: give the options of its module as a dict; got %r.' % (where, key, step[key]))
    edit = checked_params(where + '.edit', options, step.get('edit') or {})
    cleanup = None if step.get('cleanup') is None else checked_params(where + '.cleanup', options, step['cleanup'])
    return daemon, sync, edit, cleanup, bool(step.get('manage'))


def checked_steps(steps):
    """The role's daemon steps (``after.daemons``: the role's
    ``daemon_steps``, in its order), each checked (:func:`_step`) before
    anything runs."""
    return [_step(index, step) for index, step in enumerate(steps)]


def daemon_steps(projection, checked, find):
    """The role's daemon steps (:func:`checked_steps`) run as the role runs them, each
    daemon's module in check mode through ``projection``: its edit, then
    (present, where the daemon is installed) its clean-up.  What a step
    removes (the ``RuleMatch`` of its clean-up, ``_daemons/base.remove_rules``)
    is written into ``projection``, as the policy's writes are.  Where the
    role restarts the daemon between the two (:func:`_restarts`), the
    clean-up runs as after that restart (the daemon's ``restarted``: it
    then runs with the settings the edit writes).  Returns the notes: what
    each step removes, what the answer assumes of a restart, and what a step
    changes only for later (a file read at a restart not foreseen, or by new
    containers), which the answer does not show."""
    notes = []
    for daemon, sync, edit, cleanup, manage in checked:
        projection.writable = True
        foreseen = False
        try:
            runs = [sync(edit, projection, find, None, check_mode=True)]
            if cleanup is not None and runs[0]['installed']:
                foreseen = _restarts(daemon, runs[0]) and daemon.restarted is not None
                clean = daemon.restarted() if foreseen else sync
                runs.append(clean(cleanup, projection, find, None, check_mode=True))
        except MasqError as e:
            # The role's step would fail the same way: no answer after it.
            raise MasqError('after mode: the role\'s %s step fails here, so there is no answer after the role: %s'
                            % (daemon.name, e.msg), **e.details) from None
        finally:
            projection.writable = False
        notes.extend(_daemon_notes(daemon, manage, runs, foreseen))
    return notes


def _restarts(daemon, edit):
    """Whether the role restarts ``daemon`` between its edit (``edit``: that
    pass's result) and its clean-up: daemon.yml notifies the "Restart a
    daemon" handler when the edit changed something and flushes it at once;
    the handler restarts the daemon's ``service`` when the edit says
    ``restart_required`` (a daemon with no service never does)."""
    return bool(daemon.service and edit['changed'] and edit['restart_required'])


def _daemon_notes(daemon, manage, runs, foreseen):
    """The notes of one daemon's step (``runs``: the results of its passes;
    ``foreseen``: its clean-up ran as after the role's restart)."""
    name, first = daemon.name, runs[0]
    notes = []
    if manage and not first['installed']:
        notes.append('after mode: %s is %s=manage but is not installed here, so the role fails on this host (%s)'
                     % (name, daemon.variable, ' '.join(first['messages'])))
    removed = [rule for run in runs for rule in run.data.get('removed_rules') or []]
    if removed:
        notes.append('after mode: the role\'s %s step removes %s' % (name, '; '.join(removed)))
    if first['edited']:
        files = ', '.join(first['edited'])
        if foreseen:
            notes.append('after mode: the role\'s %s step edits %s and restarts %s; the answer foresees that restart: %s'
                         % (name, files, daemon.service, runs[-1].data.get('after_restart')
                            or '%s then runs with the settings the step writes' % name))
        elif daemon.service:
            notes.append('after mode: the role\'s %s step edits %s and restarts %s; what %s does after that restart '
                         '(and the rules it then leaves behind) is not foreseen: the answer shows %s\'s rules as '
                         'the step leaves them before the restart' % (name, files, daemon.service, name, name))
        else:
            notes.append('after mode: the role\'s %s step edits %s; what is made later (new containers) follows '
                         'them, the answer shows the rules there are now, as the step leaves them' % (name, files))
    for run in runs:
        for warning in run.warnings:
            note = 'after mode: %s: %s' % (name, warning)
            if note not in notes:
                notes.append(note)
    return notes
