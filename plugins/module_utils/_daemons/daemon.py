# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What a daemon declares (:class:`Daemon`): one instance per daemon
descriptor file (``_daemons/*_daemon.py``), listed in ``registry.py``.
Everything about daemons is derived from these: the node run's daemons
part and its write step (``ip_masq_node``), the role's variables, tags and
steps (the action ``ip_masq``, ``meta/argument_specs.yml`` and
``defaults/main.yml``, generated), the audit's owners (``_audit/owners.py``)
and the docs' table of daemons.

Light on purpose: the audit and the controller read every descriptor; the
editor (the code that reads and edits the daemon's files) is imported only
when a run needs it (:meth:`Daemon.editor`).

Standard library only: this file runs on managed nodes.
"""

# The role variable of every daemon, ip_masq_<name>: what each choice does.
MODES = ('auto', 'manage', 'report', 'skip')


class Daemon:
    """One daemon the role switches the masquerading of off.

    ``name``: the daemon's name: the role variable ``ip_masq_<name>``, the
    tag ``ip_masq_<name>``, the key of ip_masq_node's ``daemons``.
    ``editor``: a function returning ``(options, sync)``, the editor's
    argument spec (beside ``base.COMMON_SPEC``) and
    ``sync(params, run, find, writer, check_mode)`` (returning a
    ``base.Result``); it imports the editor, so the descriptor stays light.
    ``service``: the systemd unit restarted after the editor changed a file
    (the role restarts daemons in the registry's order), or None when an
    edit needs no restart (the editor's ``restart_required`` is then false).
    ``owner``: its ``owner.Owner`` (how the SNAT audit tells its nat rules),
    or None when its rules carry no mark of their own.
    ``default``: the role variable's default, one of :data:`MODES`.
    ``variables``: its other role variables, ``{variable: (option, spec)}``:
    the editor option the variable gives, and its argument spec entry (type,
    default, description) as ``meta/argument_specs.yml`` has it.
    ``read``: the editor options of the node run's check-mode read (which
    also looks for stale rules). ``edit``: those of the editing pass.
    ``cleanup``: those of the pass after the restart (removing the rules the
    daemon left behind; state=present only), or None.
    ``report``: the editor options of ``ip_masq_<name>: report``, or None
    when report is the check-mode read alone (nothing written).
    ``policy``: the policy options (``_core/model/options.py``) the editor takes as
    options of the same name, from their role variables (the CNI networks:
    ``ipv6``, whether our policy covers IPv6).
    ``deprecated``: ``{old choice: new choice}`` of the role variable, still
    accepted with a deprecation warning.
    ``description``: the role variable's description (argument spec).
    ``doc``: what it switches off, for the docs' table of daemons (RST).
    ``module``: the public module that runs the same editor, or None.
    ``restarted``: a function (importing the editor, as ``editor`` does)
    returning the editor's ``sync`` for the ``cleanup`` as it runs after
    the role restarted ``service`` (the same signature): the daemon runs
    with the settings the edit writes, no restart is pending, and the
    result's ``after_restart`` says what that assumes.  The explanation's
    after mode (``_explain/after.py``), which restarts nothing, runs it
    where the role would restart the daemon; None: not foreseen there."""

    def __init__(self, name, editor, service, description, doc, owner=None, default='auto', variables=None,
                 read=None, edit=None, cleanup=None, report=None, deprecated=None, module=None, policy=(),
                 restarted=None):
        self.name = name
        self.editor = editor
        self.service = service
        self.description = description
        self.doc = doc
        self.owner = owner
        if default not in MODES:
            raise ValueError('daemon %s: default %r is not one of %s' % (name, default, ', '.join(MODES)))
        self.default = default
        self.variables = dict(variables or {})
        self.read = dict(read or {})
        self.edit = dict(edit or {})
        self.cleanup = None if cleanup is None else dict(cleanup)
        self.report = None if report is None else dict(report)
        self.deprecated = dict(deprecated or {})
        self.module = module
        self.policy = tuple(policy)
        self.restarted = restarted

    @property
    def variable(self):
        """Its role variable (and tag): ``ip_masq_<name>``."""
        return 'ip_masq_%s' % self.name

    def choices(self):
        """The role variable's choices: :data:`MODES`, then the deprecated spellings."""
        return list(MODES) + sorted(self.deprecated)

    def options(self, values, mode):
        """The editor options the role's typed ``values`` give (without
        state, backup_dir and the pass's own), for ``mode`` (one of
        :data:`MODES` but skip)."""
        out = dict((option, values[variable]) for variable, (option, _spec) in sorted(self.variables.items()))
        if self.policy:
            # Start-up cost: the options table loads only for a daemon that takes policy options, not with each descriptor.
            from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import BY_NAME  # pylint: disable=import-outside-toplevel
            out.update((name, values[BY_NAME[name].role]) for name in self.policy)
        if mode == 'report' and self.report is not None:
            out.update(self.report)
        return out
