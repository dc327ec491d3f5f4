# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ip_masq role's one task: validate on the controller, render the
agent's config file and the resync's units there, then run ipmasq.agent.ip_masq_node once on the node
(one SSH command with pipelining). Documentation: plugins/modules/ip_masq.py."""

from collections import namedtuple
from collections.abc import Mapping

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent.metrics import FILE_NAME as METRICS_FILE
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import role_msg
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import code_dirs, resync_root
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _units
from ansible_collections.ipmasq.agent.plugins.plugin_utils._config_file import config_text
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import RoleArgsError, role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import ROLE_PATH, play_variables, read, role_defaults, role_spec

NODE_MODULE = 'ipmasq.agent.ip_masq_node'
# Where each backend's tool (backend.Backend.tool: iptables-restore, nft) is
# when installed (Debian, Ubuntu, EL: /usr/sbin; /sbin where /usr is not
# merged): looked at for packages.yml.
TOOL_DIRS = ('/usr/sbin', '/sbin')


def tool_paths(backend):
    """The paths of ``backend``'s (a class of the registry) tool."""
    return [directory + '/' + backend.tool for directory in TOOL_DIRS]


# Which tag reaches which part of the node's run (the task itself always runs:
# the validation is never skipped). The later steps' tasks carry their own tags.
PART_TAGS = {
    'files': ('ip_masq_config', 'ip_masq_resync'),
    'resync_code': ('ip_masq_resync',),
    'chain': ('ip_masq_chain',),
    'audit': ('ip_masq_audit',),
}
TMPFILES = '''# Managed by the ipmasq.agent.ip_masq role (resync).
# ip-masq-agent.service sees /run read-only; these lock files must exist before it runs.
f {xtables} 0600 root root -
f {writers} 0600 root root -
'''
SYSTEMD_MSG = (
    '{host} does not run systemd, and the resync that keeps the chain applied runs as systemd units '
    '(ip_masq_resync_enabled: true). Nothing was changed on this node. Set ip_masq_resync_enabled: false for it to '
    'apply the chain without the resync (nothing then repairs it after drift or a reboot), or run the role on a node '
    'booted with systemd.')


# The tags of the later steps' tasks: a step none of whose tags is picked is
# not listed. A daemon's tag is its role variable's name (ip_masq_<daemon>).
STEP_TAGS = {
    'packages': ('ip_masq_packages',),
    'resync_code': ('ip_masq_resync',),
    'apply': ('ip_masq_chain',),
    'resync': ('ip_masq_resync',),
    'resync_absent': ('ip_masq_resync',),
    'other_snat': (),
    'audit': ('ip_masq_audit',),
    'absent': ('ip_masq_chain', 'ip_masq_config'),
    # Last, where ip_masq_explain_flows gives flows (present only).
    'explain': ('ip_masq_explain',),
}
# The version in which a deprecated choice of a daemon's variable goes.
DEPRECATED_UNTIL = '3.0.0'


def step_tags(step):
    """The tags of a later step's tasks; the daemon steps' follow the daemon registry."""
    if step in ('other_snat', 'absent'):
        return STEP_TAGS[step] + tuple(d.variable for d in registry.DAEMONS)
    return STEP_TAGS[step]


def explain_step(args, always=False):
    """What the explain step (explain.yml) runs ipmasq.agent.snat_explain
    with, from ``args`` (``_role_args.role_args``' result): the checked
    ``flows`` of ip_masq_explain_flows, and the module's ``after`` (check mode:
    the node as this host's run leaves it, its policy and the daemon steps a
    run without --tags runs); None where no flow is given, unless ``always``
    (validate_only: playbooks/explain.yml's after mode takes ``after``)."""
    flows = args.get('explain_flows') or []
    if not flows and not always:
        return None
    present = args['state'] == 'present'
    daemons = [args['daemon_steps'][d.name] for d, mode in args['daemons']
               if mode != 'skip' and (not present or mode != 'report')]
    return {'flows': flows, 'after': {'chain': args['masq_chain'], 'daemons': daemons,
                                      'allow_catch_all': args['values']['ip_masq_allow_catch_all']}}


def _read_once():
    """Read here, at the action's import, what every host's run reads of the
    collection's own files: the role's argument spec and defaults
    (``_role_vars``) and the resync's code, whose hash names the unit's
    PYTHONPATH (``_resync_code.resync_root``).  Ansible imports an action in
    its main process and forks a worker per host and task from it, so each
    worker starts with these read; read first in ``run()``, they would be
    read again by every host's worker.  They are files of this collection,
    which a run does not change.  A file that cannot be read is read again
    by ``run()``, which then says why."""
    try:
        role_spec()
        play_variables()
        role_defaults()
        resync_root('/')
    except Exception:  # pylint: disable=broad-except
        pass


_read_once()


def picked(tags, run_tags, skip_tags):
    """Whether --tags and --skip-tags let a task with ``tags`` run."""
    if all(tag in skip_tags for tag in tags):
        return False
    return 'all' in run_tags or 'tagged' in run_tags or any(tag in run_tags for tag in tags)


def selected(part, run_tags, skip_tags):
    tags = PART_TAGS[part]
    if any(tag in skip_tags for tag in tags):
        return False
    return 'all' in run_tags or 'tagged' in run_tags or any(tag in run_tags for tag in tags)


# What the action reads of a host's task_vars, once: its name, its role
# variables (templated), every variable name it has, what this run's tags
# pick (the node run's parts, the later steps, the daemons, by name) and
# ansible_managed. The rest of the run reads this, never task_vars.
Host = namedtuple('Host', 'name variables names parts steps daemons managed')


def plain(value):
    """``value`` (a templated role variable) as plain Python: ``dict``,
    ``list``, ``str``, ``int``, ``float``, ``bool`` and None, without what
    ansible-core's templating attaches (its lazy containers, the tags that
    say where a value came from). The validator (``_role_vars.read``) deep-
    copies every value it checks, and a tagged value copies through pickle's
    reduce protocol: that copy was most of what reading a host's variables
    cost. What the role does with the values (check, type, write to the node)
    needs none of it. Anything else stays as it is."""
    if isinstance(value, Mapping):
        return dict((plain(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    for kind in (str, int, float):
        if isinstance(value, kind):
            return kind.__new__(kind, value)
    return value


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('validate_only',))

    def _role_path(self):
        role = getattr(self._task, '_role', None)
        return role._role_path if role is not None else ROLE_PATH

    def _variables(self, task_vars):
        """The role's variables (``ip_masq_*`` and the internal ``__ip_masq_*``
        its defaults name), templated: the play's values over the role's
        defaults (read from the role when the action runs outside it). A
        play's other ip_masq_* variables (audit.yml's ip_masq_report_*) are
        not templated here."""
        role = getattr(self._task, '_role', None)
        names = role.get_default_vars() if role is not None else role_defaults(ROLE_PATH)
        out = {}
        for name in names:
            if name.startswith(('ip_masq_', '__ip_masq_')):
                out[name] = plain(self._templar.template(task_vars[name] if name in task_vars else names[name]))
        return out

    def _host(self, task_vars):
        """The host's :data:`Host`, read from ``task_vars``."""
        run_tags = task_vars.get('ansible_run_tags') or ['all']
        skip_tags = task_vars.get('ansible_skip_tags') or []
        managed = self._templar.template(task_vars['ansible_managed']) if 'ansible_managed' in task_vars else None
        return Host(name=task_vars.get('inventory_hostname', '?'), variables=self._variables(task_vars),
                    names=list(task_vars),
                    parts=frozenset(part for part in PART_TAGS if selected(part, run_tags, skip_tags)),
                    steps=frozenset(step for step in STEP_TAGS if picked(step_tags(step), run_tags, skip_tags)),
                    daemons=frozenset(d.variable for d in registry.DAEMONS
                                      if picked((d.variable,), run_tags, skip_tags)),
                    managed=managed or C.DEFAULT_MANAGED_STR)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            validate_only = boolean(self._task.args.get('validate_only', False), strict=True)
        except TypeError:
            raise AnsibleError('ipmasq.agent.ip_masq: validate_only must be true or false, got %r.'
                               % (self._task.args.get('validate_only'),)) from None
        host = self._host(task_vars)
        # Every variable name of the host (top-level names only: an ip_masq_*
        # name the role does not declare is refused as a misspelling).
        given = read(host.variables, host.name, role_spec(self._role_path()), names=host.names,
                     known=play_variables(self._role_path()))
        try:
            args = role_args(given)
        except RoleArgsError as e:
            result.update(failed=True, msg=to_text(e.message))
            return result
        # From here on, the typed values only: what the controller checked is what the node gets.
        values = dict(host.variables, **args['values'])
        facts = args['facts']
        config = config_text(values, facts, host.managed) if facts else None
        # This version's root of the resync's code, computed once: the service unit's
        # PYTHONPATH, the code part installs it.
        code_root = resync_root(values['ip_masq_lib_dir']) if facts and (
            validate_only or values['ip_masq_resync_enabled']) else None
        # The resync's units, rendered once (validate_only returns them; the files part writes them).
        units = (_units.units(values, args['timer'], code_root, host.managed)
                 if code_root else None)
        # The typed role variables: the later steps read these, never the raw ones.
        typed = dict((name, value) for name, value in args['values'].items() if name.startswith('ip_masq_'))
        present = values['ip_masq_state'] == 'present'
        modes = args['daemons']
        for text in args['deprecations']:
            result.setdefault('deprecations', []).append(
                {'msg': text, 'version': DEPRECATED_UNTIL, 'collection_name': 'ipmasq.agent'})
        # The registered daemons, in the registry's order, that are not
        # 'skip' and whose tag is picked: the daemon step (other_snat.yml)
        # runs them ('report' ones, with ip_masq_state=present, are only read).
        daemons = [(d, mode) for d, mode in modes if mode != 'skip' and d.variable in host.daemons]
        backup_dir = values['ip_masq_backup_dir']
        daemon_steps = [args['daemon_steps'][d.name] for d, mode in daemons if not present or mode != 'report']
        if validate_only:
            result.update(changed=False, facts=facts, masq_chain=args['masq_chain'], config=config, settings=typed,
                          timer=args['timer'], ansible_facts=dict(facts), daemon_steps=daemon_steps,
                          units=units, resync_start=list(_units.started(values['ip_masq_resync_mode'])),
                          explain=explain_step(args, always=True),
                          msg='settings valid (only validated: no node contacted)')
            return result

        internal = dict((name, values[name]) for name in ('__ip_masq_xtables_lock', '__ip_masq_writers_lock',
                                                          '__ip_masq_systemd_dir'))
        resync_on = present and values['ip_masq_resync_enabled']
        systemctl = values['ip_masq_resync_systemctl']
        check = bool(self._play_context.check_mode)
        audit = values['ip_masq_audit']

        unit_dir = values['ip_masq_unit_dir']
        # Every unit of either resync mode (the removal looks for each), and this mode's.
        unit_paths = [unit_dir + '/' + name for name in _units.UNIT_NAMES]
        mode = values['ip_masq_resync_mode']
        started = _units.started(mode)
        # A switch between the modes, in the files part's one all-or-nothing change: the other
        # mode's units and the enable links of the units this mode does not enable go (no-ops
        # where they are not there), as this mode's units are written.
        others = [unit_dir + '/' + name for name in _units.others(mode)] + [
            unit_dir + '/' + link for link in _units.stale_links(mode)]
        service_path = unit_dir + '/' + _units.SERVICE
        tmpfiles = values['ip_masq_tmpfiles_dir'] + '/ip-masq-agent.conf'
        last_good = values['ip_masq_state_dir'] + '/' + _units.LAST_GOOD
        resync_paths = unit_paths + [tmpfiles] + code_dirs(values['ip_masq_lib_dir']) + [last_good]
        # What resync.yml and resync_absent.yml act on (the code: resync_code's own removal).
        metrics_dir = values['ip_masq_metrics_dir']
        resync_files = {'units': unit_paths, 'remove': unit_paths + [tmpfiles, last_good] + (
            [metrics_dir + '/' + METRICS_FILE] if metrics_dir else [])}

        node = {}
        if 'files' in host.parts or not present:
            files, query, absent = [], [], []
            if present and 'files' in host.parts:
                files.append({'path': values['ip_masq_config_path'], 'content': config})
                if resync_on:
                    xtables, writers = internal['__ip_masq_xtables_lock'], internal['__ip_masq_writers_lock']
                    files += [{'path': tmpfiles, 'content': TMPFILES.format(xtables=xtables, writers=writers)},
                              {'path': xtables, 'mode': '0600'}, {'path': writers, 'mode': '0600'}]
                    files += [{'path': unit_dir + '/' + name, 'content': units[name]} for name in _units.mode_units(mode)]
            if present:
                query += [path for cls in backends.writers() if cls.tool for path in tool_paths(cls)]
            if not resync_on:
                query += resync_paths
            elif 'files' in host.parts:
                absent += others
            node['files'] = {
                'owner': 'root', 'group': 'root', 'mode': '0644', 'files': files, 'query': query, 'absent': absent,
                'require': [internal['__ip_masq_systemd_dir']] if resync_on and files else [],
                'require_msg': SYSTEMD_MSG.format(host=host.name),
            }
        if resync_on and 'resync_code' in host.parts:
            node['resync_code'] = {'path': values['ip_masq_lib_dir'], 'python': values['ip_masq_python'], 'root': code_root,
                                   'unit': service_path, 'systemctl': systemctl}
            if systemctl and not check:
                node['daemon_reload_for'] = [service_path]
            if systemctl:
                # Every unit of either mode: this mode's are started where idle, the other's stopped where they run.
                node['units'] = list(_units.UNIT_NAMES)
        if present and 'chain' in host.parts:
            node['chain'] = args['masq_chain']
            if values['ip_masq_allow_catch_all']:
                node['allow_catch_all'] = True
        # The daemons' settings read with their modules' code in check mode:
        # other_snat.yml runs only where one of them would change something
        # (or a 'manage' one is missing). A 'report' daemon is only read.
        if present and daemons:
            node['daemons'] = dict(
                ((d.name, dict({'state': 'present', 'backup_dir': backup_dir}, **dict(d.options(values, mode), **d.read)))
                 for d, mode in daemons),
                required=[d.name for d, mode in daemons if mode == 'manage'],
                report=[d.name for d, mode in daemons if mode == 'report'])
        # The audit comes last, when every other piece has done its work: in
        # this run only where no daemon step follows (the
        # node run leaves it out where its daemons part says one does).
        if present and audit != 'skip' and 'chain' in node and 'audit' in host.parts:
            node['audit'] = {'chain': values['ip_masq_chain'], 'ipv6': values['ip_masq_enable_ipv6'],
                             'allow': values['ip_masq_audit_allow'], 'on_offenders': 'warn' if check else audit,
                             'advice': 'role'}

        parts = sorted(node)
        if node:
            ran = self._execute_module(module_name=NODE_MODULE, module_args=dict(node), task_vars=task_vars)
            if self._display.verbosity < 3:
                # The node module's arguments (ansible-core's 'invocation', which its callbacks show from -vvv on):
                # this action's own rendering (the files' whole text among them), a third of the result that the
                # controller's main process would convert, store and hand to every callback for each host.
                ran.pop('invocation', None)
        else:
            ran = {'changed': False}
        result.update(ran)
        if ran.get('failed') or ran.get('unreachable'):
            return result

        files_run = ran.get('files') or {}
        found = files_run.get('existing')
        # What goes before the files go (the removal): the units found before
        # this run wrote anything. Without the files part (--tags), the
        # timer's units, as before.
        if not resync_on:
            present_units = [name for name in _units.UNIT_NAMES if unit_dir + '/' + name in found] \
                if found is not None else list(_units.mode_units(None))
            switch = _units.leaving(present_units)
            switch['remove'] = [unit_dir + '/' + name for name in switch['remove']]
            resync_files['switch'] = switch
        # A switch: the other mode's units that systemd still runs (their files went in the node run).
        states = ran.get('units') or {}
        stop = _units.stopping(mode, states) if resync_on else []
        resync_files['stop'] = stop
        resync_files['reset'] = _units.clearing(mode, states) if resync_on else []
        resync_files['start'] = list(started)
        steps = []
        if present:
            # Without the files part (--tags), every step that may be needed runs.
            tools = set(found or [])
            backend = values['ip_masq_backend']
            has = dict((cls.name, bool(tools & set(tool_paths(cls)))) for cls in backends.writers() if cls.tool)
            missing = ran.get('packages_needed') or (
                not any(has.values()) if backend == 'auto' else backend in has and not has[backend])
            if values['ip_masq_install_packages'] and missing:
                steps.append('packages')
            if 'resync_code' not in node and resync_on:
                steps.append('resync_code')
            if ran.get('chain') is None:
                steps.append('apply')
            if resync_on and systemctl:
                changed_units = set(files_run.get('changed_paths') or []) & set(unit_paths)
                idle = [n for n in started if (states.get(n) or {}).get('enabled') != 'enabled'
                        or (states.get(n) or {}).get('active') != 'active']
                if stop or resync_files['reset'] or changed_units or idle or not states:
                    steps.append('resync')
            elif not resync_on and (found is None or set(found) & set(resync_paths)):
                steps.append('resync_absent')
            if daemon_steps and (ran.get('daemons') is None or ran.get('daemons_needed')):
                steps.append('other_snat')
            if audit != 'skip' and ran.get('audit') is None:
                steps.append('audit')
            explain = explain_step(args)
            if explain:
                steps.append('explain')
        else:
            if found is None or set(found) & set(resync_paths):
                steps.append('resync_absent')
            steps.append('absent')
        for key in ('files', 'resync_code', 'chain', 'audit'):
            result.setdefault(key, None)
        # In the order of STEP_TAGS (main.yml includes them as listed), those this run's tags pick.
        steps = [step for step in STEP_TAGS if step in steps and step in host.steps]
        if 'explain' in steps:
            result['explain'] = explain
        # Which parts of the node run changed, and the files it changed (as node_files names them).
        result['changed_parts'] = [part for part in ('files', 'resync_code', 'chain', 'audit')
                                   if (ran.get(part) or {}).get('changed')]
        result['changed_paths'] = list(files_run.get('changed_paths') or [])
        result.update(steps=steps, facts=facts, masq_chain=args['masq_chain'], parts=parts, settings=typed,
                      resync_files=resync_files,
                      daemon_steps=daemon_steps)
        result['msg'] = role_msg(ran, steps, check)
        return result
