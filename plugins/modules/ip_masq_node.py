#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Over 500 lines on purpose: about 210 of them are the documentation of its
# parts' options and results; the code is one function per part, each a call
# into module_utils.

DOCUMENTATION = r'''
---
module: ip_masq_node
short_description: The ip_masq role's node-side step (internal) - files, policy, resync code and audit in one run
version_added: 2.0.0
description:
  - B(Internal to the ipmasq.agent.ip_masq role) (R(the role's documentation,ansible_collections.ipmasq.agent.ip_masq_role)).
    The role's action P(ipmasq.agent.ip_masq#module) validates the
    role's variables on the controller, renders the role's templates there and runs this module once per host, so a
    run that changes nothing reaches each node with one SSH command. Its options may change without notice; in
    playbooks use P(ipmasq.agent.masq_chain#module), P(ipmasq.agent.node_files#module),
    P(ipmasq.agent.resync_code#module) and P(ipmasq.agent.snat_sources#module), whose code it runs.
  - "In one run and in this order: writes the agent's files (O(files), as P(ipmasq.agent.node_files#module): all or
    nothing); installs the resync's code (O(resync_code), as P(ipmasq.agent.resync_code#module)): code before
    units; runs C(systemctl daemon-reload) when a path of O(daemon_reload_for) was written, so that systemd loads the
    changed service before the policy is applied; applies the policy (O(chain), as P(ipmasq.agent.masq_chain#module));
    looks at what the role's later steps need (whether C(iptables-restore) and C(nft) are installed, the state of the
    units in O(units)); reads the settings of the daemons of the collection's daemon registry (O(daemons): the code
    of each daemon's module, always in check mode: it only reads); and audits (O(audit), as
    P(ipmasq.agent.snat_sources#module)), last."
  - Where O(daemons) finds that one of those modules would change something, that a daemon of its C(required) list
    is not installed, or that it could not read a daemon's settings (RV(daemons_needed)), the audit is not run; the
    role then runs the daemon modules themselves, and the audit after them. Otherwise the warnings those modules
    would give (for example a daemon the role only reports on) are this module's warnings.
  - A part whose option is null is not run. A part that fails ends the run there; the parts run before it keep what
    they did, and the failure says which parts changed (a failed audit says what they changed, as RV(msg) of a run
    that passes says it, for example that the chain was written).
  - Where the tool the chosen backend needs (C(iptables-restore) for V(iptables), C(nft) for V(nftables), either
    for V(auto)) is missing, the policy is not applied and RV(packages_needed) is true (the role then installs the
    package and applies the policy with P(ipmasq.agent.masq_chain#module)); the audit is then not run either.
  - Needs only Python's standard library on the node.
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  check_mode:
    support: full
    description: Every part reads and reports what it would change; nothing is written, and systemctl only reads.
  diff_mode:
    support: full
    description: One diff per file that changes, one per table (iptables nat per family, our nftables table) that
      changes, and one for the resync code's files.
  platform:
    support: full
    platforms: posix
    description: Any POSIX node with Python; systemd only where O(daemon_reload_for) or O(units) are given.
options:
  files:
    description: The options of P(ipmasq.agent.node_files#module) (C(files), C(absent), C(query), C(mode), C(owner),
      C(group), C(directory_mode), C(require), C(require_msg)), or null to write no file.
    type: dict
  resync_code:
    description:
      - The options of P(ipmasq.agent.resync_code#module) (C(path), C(python), C(unit)) to install the resync's
        code, or null. With C(root), the root the controller named in the unit, where that root is in place
        the code is neither read nor written; elsewhere a node whose code has another id is refused before anything
        is written. Earlier versions are removed after the daemon-reload, once C(unit)
        names this version's root (with C(systemctl) true, also the unit systemd has loaded).
    type: dict
  daemon_reload_for:
    description: Paths of O(files); when one of them is written, C(systemctl daemon-reload) runs before the policy is
      applied (not in check mode).
    type: list
    elements: path
    default: []
  chain:
    description:
      - The options of P(ipmasq.agent.masq_chain#module), or null to leave the policy alone.
      - Typed with masq_chain's own argument spec and checked before any part writes anything. Its CIDR lists are
        refused as the role's controller refuses them (an entry that is not a CIDR in the form the role writes, a zone
        index, a duplicate unless C(rule_format=upstream), and a C(nonmasquerade_cidrs) that covers all of
        IPv4 or IPv6 unless O(allow_catch_all)).
    type: dict
  allow_catch_all:
    description: Whether C(nonmasquerade_cidrs) of O(chain) may cover all of IPv4 or IPv6 (the role's C(ip_masq_allow_catch_all)).
    type: bool
    default: false
    version_added: 2.0.0
  units:
    description: systemd units whose state (enabled, active) is read after the policy is applied (RV(units)), or
      an empty list to read none.
    type: list
    elements: str
    default: []
  daemons:
    description:
      - Which daemons' settings to read, or null to read none. Nothing is written, no rule is removed and nothing is
        restarted, whatever the options say (check mode).
      - A key per daemon of the collection's daemon registry (its name, as in the role's variable
        C(ip_masq_<name>)), its value the options of that daemon's module; a daemon left out is not read.
      - The key C(required) lists the daemons the role manages (V(manage)); one that is not installed is in
        RV(daemons_needed). The key C(report) lists those the role only reports on (V(report)), never in
        RV(daemons_needed); their warnings (and what they would change) are this module's.
    type: dict
  daemon:
    description:
      - One daemon's module run, not only read (the role's daemon step), or null. Run alone, after the other parts.
      - C(name) is the daemon's name in the registry, C(options) the options of its module.
    type: dict
    version_added: 2.0.0
  audit:
    description: The options of P(ipmasq.agent.snat_sources#module), or null to audit nothing. With
      C(on_offenders=fail) an offender fails the run after everything else was done.
    type: dict
'''

EXAMPLES = r'''
# The role runs it (through its action ipmasq.agent.ip_masq); by hand it
# would read, for example:
- name: Write the config file, apply the chain and audit, in one run
  ipmasq.agent.ip_masq_node:
    files:
      files:
        - path: /etc/ip-masq-agent/config
          content: "nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n"
      mode: "0644"
    chain:
      nonmasquerade_cidrs: [10.0.0.0/8]
    audit:
      on_offenders: warn
'''

RETURN = r'''
msg:
  description: The messages of the parts that changed (files, resync code, chain; see each module's C(msg)), joined by
    C(;), or C(no change); in check mode what the run would do.
  returned: success
  type: str
  sample: 'IP-MASQ-AGENT: IPv4 5 rules written (was 0), IPv6 not managed; backend iptables, asked for (backend=iptables)'
  version_added: 2.0.0
files:
  description: The result of the files part, as P(ipmasq.agent.node_files#module) returns it; null when not run.
  returned: always
  type: dict
resync_code:
  description: The result of the resync code part, as P(ipmasq.agent.resync_code#module) returns it; null when not run.
  returned: always
  type: dict
daemon_reloaded:
  description: Whether C(systemctl daemon-reload) ran (or, in check mode, would have).
  returned: always
  type: bool
chain:
  description: The result of the policy part, as P(ipmasq.agent.masq_chain#module) returns it; null when not run.
  returned: always
  type: dict
packages_needed:
  description: Whether the policy was not applied because the chosen backend's tool is missing.
  returned: always
  type: bool
tools:
  description: Whether C(iptables-restore) and C(nft) are installed (C(iptables), C(nft)).
  returned: always
  type: dict
  sample: {"iptables": true, "nft": false}
units:
  description: Per unit of O(units), C(enabled) and C(active) (as C(systemctl is-enabled) and C(is-active) print
    them); empty when none was asked for, or C(systemctl) is missing.
  returned: always
  type: dict
  sample: {"ip-masq-agent.timer": {"enabled": "enabled", "active": "active"}}
daemons:
  description: Per daemon of O(daemons) (keys the daemons' names; each value as listed here) what its module found,
    in check mode; null when O(daemons) is null.
  returned: always
  type: dict
  sample: {"docker": {"would_change": false, "installed": false, "error": null, "needed": false,
           "messages": ["Docker is not installed (no docker.service, no dockerd); nothing to do."], "warnings": []}}
  contains:
    would_change:
      description: Whether the module would change something (a file, a stale rule it would remove).
      type: bool
    installed:
      description: Whether the daemon is installed (as the module's RV(ipmasq.agent.docker_ip_masq#module:installed)).
      type: bool
    messages:
      description: The module's messages.
      type: list
      elements: str
    warnings:
      description: The module's warnings (also this module's warnings when RV(daemons_needed) is empty).
      type: list
      elements: str
    error:
      description: Why the settings could not be read (the module would fail, or something else went wrong); null
        when they were read.
      type: str
    needed:
      description: Whether the role must run this daemon's module (it would change something, it is required and
        not installed, or its settings could not be read).
      type: bool
daemons_needed:
  description: The daemons of O(daemons) whose module the role must run (see RV(daemons.needed)); when any is,
    the audit was not run.
  returned: always
  type: list
  elements: str
daemon:
  description: The result of O(daemon), as the daemon's module returns it (without its C(warnings) and C(diff),
    which are this module's), with the daemon's C(service) (the systemd unit restarted after an edit); null when not
    run.
  returned: always
  type: dict
  version_added: 2.0.0
audit:
  description: The result of the audit, as P(ipmasq.agent.snat_sources#module) returns it; null when not run.
  returned: always
  type: dict
problems:
  description: One line per offender of the audit (what to do), empty when ours is the only SNAT.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.backends import installed_tools, needed_tools
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._masq_chain import apply_checked, chain_params
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module
from ansible_collections.ipmasq.agent.plugins.module_utils._msg import node_msg
from ansible_collections.ipmasq.agent.plugins.module_utils._snat_sources import SPEC as SNAT_SOURCES_SPEC
# Imported where a part needs them (each import costs every run; most runs
# need few parts): the files part (_files), the resync code part
# (_resync_roots; where it installs or sweeps, _resync_code, and the resync
# with everything it imports, which travels in this module's payload: that
# is the code the part installs), the daemons part (_daemons) and the audit
# (_audit, _snat_sources' inspect).


def split_by_table(before, after):
    """One diff per table: diff_text's sections ('# <tools> nat (IPv4)',
    '# nft list table ...') paired by their heading; only those that differ."""
    def sections(text):
        out, name = {}, None
        for line in (text or '').splitlines(True):
            if line.startswith('# '):
                name = line[2:].strip()
                out[name] = ''
            elif name is not None:
                out[name] += line
        return out
    old, new = sections(before), sections(after)
    names = list(old) + [n for n in new if n not in old]
    return [{'before_header': name, 'after_header': name, 'before': old.get(name, ''), 'after': new.get(name, '')}
            for name in names if old.get(name, '') != new.get(name, '')]


def code_part(params, check_mode, run):
    """The resync code's part: this version's root installed (``root``: the
    one the controller named in the unit; a node whose payload makes another
    is refused before anything is written). Where the named root is in place
    whole (every no-change run), nothing of the payload's code is read.
    Returns ``(written, removed, root)``."""
    # pylint: disable=import-outside-toplevel
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._resync_roots import in_place
    path = params['path']
    if params.get('root') and in_place(path, params['root']):
        return [], [], params['root']
    # Start-up cost: the installer (it reads and hashes the payload's code) only where the root is not in place.
    from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import install, package_sources, resync_root
    root = resync_root(path)
    if params.get('root') and params['root'] != root:
        raise MasqError('resync code: the controller named %s in the unit, but this collection installs %s. '
                        'Nothing was changed.' % (params['root'], root))
    written, removed = install(path, package_sources(), run, params.get('python') or '/usr/bin/python3',
                               check_mode=check_mode)
    return written, removed, root


def _payload():
    """Never called. AnsiballZ ships every module that an import statement
    of this file names, one inside a function too: this one names the
    resync, so that it and everything it imports travel in this module's
    payload (that is the code the resync code part installs, read as files
    by ``_resync_code.package_sources``). Run, it would cost every node run
    the import of the resync and the agent config's parser, which no part
    uses."""
    # Start-up cost: the payload needs the statement, no run needs the import.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel


def code_sweep(params, root, check_mode, reloaded, written_units, run, find):
    """The earlier versions' roots removed once the service unit names this one (``_resync_code.later_sweep``)."""
    # pylint: disable=import-outside-toplevel
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._resync_roots import stale
    if not stale(params['path'], root):
        return []
    # Start-up cost: the installer's sweep only where an earlier version is there.
    from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import later_sweep
    systemctl = find('systemctl') if params.get('systemctl') else None
    return later_sweep(params['path'], root, params.get('unit'), check_mode, reloaded, written_units, run, systemctl)


def audit_params(given):
    """The audit part's options typed by snat_sources' own spec, its allow list checked, before anything is written."""
    result = ArgumentSpecValidator(SNAT_SOURCES_SPEC).validate(dict(given))
    if result.error_messages:
        raise MasqError('audit: %s. Nothing was changed.' % '; '.join(result.error_messages), failed_part='audit')
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._audit.allow import parse_allow  # pylint: disable=import-outside-toplevel
    try:
        parse_allow(result.validated_parameters['allow'])
    except MasqError as e:
        raise MasqError(_nothing_changed('audit: ' + e.msg), failed_part='audit') from None
    return result.validated_parameters


def _nothing_changed(msg):
    msg = msg.rstrip()
    return msg if msg.endswith('Nothing was changed.') else msg + ' Nothing was changed.'


def daemon_params(name, options, given):
    """``given`` checked against the daemon module's argument spec, with its defaults."""
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import checked_params  # pylint: disable=import-outside-toplevel
    return checked_params('daemons.%s' % name, options, given)


def daemon_names(params):
    """The daemons ``daemons`` names: its keys but required and report, and those two lists."""
    names = [n for n in params if n not in ('required', 'report')]
    for key in ('required', 'report'):
        given = params.get(key) or []
        names += given if isinstance(given, list) else [given]
    return names


def registered(names, where):
    """The registry's daemons (``_daemons/registry.py``), in its order; an
    unknown name of ``names`` is an error, before anything is written."""
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry  # pylint: disable=import-outside-toplevel
    unknown = [n for n in names if n not in registry.names()]
    if unknown:
        raise MasqError('%s: %s is not a daemon of the registry (%s). Nothing was changed.'
                        % (where, ', '.join(repr(n) for n in unknown), ', '.join(registry.names())), failed_part=where)
    return registry.DAEMONS


def daemons_part(params, run, find, module):
    """What each daemon's module would do, in check mode (it reads, writes
    nothing, removes no rule, restarts nothing): ``{name: {...}}``."""
    out = {}
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._files.writer import Writer  # pylint: disable=import-outside-toplevel
    required, report = params.get('required') or [], params.get('report') or []
    for daemon in registered(daemon_names(params), 'daemons'):
        given = params.get(daemon.name)
        if given is None:
            continue
        name = daemon.name
        entry = {'would_change': False, 'installed': False, 'messages': [], 'warnings': [], 'error': None}
        try:
            options, sync = daemon.editor()
            found = sync(daemon_params(name, options, given), run, find, Writer(module),
                         check_mode=True).module_result(check_mode=True)
        except MasqError as e:
            entry['error'] = e.msg
        except Exception as e:  # pylint: disable=broad-exception-caught
            # Conservative: the role then runs the module itself, which reports it.
            entry['error'] = '%s: %s' % (type(e).__name__, e)
        else:
            entry.update(would_change=bool(found['changed']), installed=bool(found['installed']),
                         messages=list(found['messages']), warnings=list(found['warnings']))
        if name in report:
            # Only read: what it would change is a warning, never a step of the role.
            if entry['error']:
                entry['warnings'].append('%s: its settings could not be read: %s' % (name, entry['error']))
            elif entry['would_change']:
                said = ' '.join(entry['messages']) or 'see its module'
                entry['warnings'].append('%s would change (ip_masq_%s: report): %s' % (name, name, said))
            entry['needed'] = False
        else:
            entry['needed'] = bool(entry['would_change'] or entry['error']
                                   or (name in required and not entry['installed']))
        out[name] = entry
    return out


def daemon_part(given, check, run, find, module):
    """One daemon's module run (the role's daemon step): ``given`` is
    ``{name, options}``. Its result, with the daemon's systemd ``service``."""
    # Start-up cost: a node run imports only the parts it runs.
    from ansible_collections.ipmasq.agent.plugins.module_utils._files.writer import Writer  # pylint: disable=import-outside-toplevel
    name = given.get('name')
    if not isinstance(name, str):
        raise MasqError('daemon.name: give the name of a daemon of the registry. Nothing was changed.',
                        failed_part='daemon')
    daemon = [d for d in registered([name], 'daemon') if d.name == name][0]
    options, sync = daemon.editor()
    params = daemon_params(name, options, given.get('options') or {})
    out = sync(params, run, find, Writer(module), check_mode=check).module_result(check_mode=check)
    out['service'] = daemon.service
    return out


def unit_states(names, run, find):
    """``{unit: {'enabled': ..., 'active': ...}}`` as systemctl prints them
    (one unit per call: an unknown unit prints nothing on stdout)."""
    systemctl = find('systemctl')
    if not names or not systemctl:
        return {}
    states = {}
    for name in names:
        states[name] = {}
        for verb, key in (('is-enabled', 'enabled'), ('is-active', 'active')):
            _rc, out, _err = run([systemctl, verb, name])
            states[name][key] = out.strip() or 'unknown'
    return states


def node_step(module, run, find):
    p = module.params
    check, diff = module.check_mode, module._diff
    result = {'changed': False, 'files': None, 'resync_code': None, 'daemon_reloaded': False, 'chain': None,
              'packages_needed': False, 'tools': {}, 'units': {}, 'daemons': None, 'daemons_needed': [],
              'daemon': None, 'audit': None, 'problems': [],
              'warnings': [], 'diff': []}
    done = []

    def part(name, work):
        try:
            return work()
        except MasqError as e:
            changed = [n for n in done if (result.get(n) or {}).get('changed')]
            if changed and name == 'audit':
                # The audit reads what this run wrote: say what that was, as a run that passes says it.
                e.msg = '%s (Before the audit failed, this run changed the node: %s.)' % (
                    e.msg.rstrip(), node_msg(dict((n, result[n]) for n in done), check))
            elif changed:
                e.msg = '%s (This run changed, before it failed: %s.)' % (e.msg.rstrip(), ', '.join(changed))
            e.details = dict(e.details or {}, failed_part=name, changed=bool(changed) or e.details.get('changed', False),
                             **{n: result[n] for n in done})
            raise

    # Every option is typed and checked before anything is written.
    chain = chain_params(p['chain'], p['allow_catch_all']) if p['chain'] is not None else None
    if p['daemons'] is not None:
        registered(daemon_names(p['daemons']), 'daemons')
    audit = audit_params(p['audit']) if p['audit'] is not None else None
    if p['files'] is not None:
        # Start-up cost: a node run imports only the parts it runs.
        from ansible_collections.ipmasq.agent.plugins.module_utils._files import node_files  # pylint: disable=import-outside-toplevel
        files = part('files', lambda: node_files.manage(p['files'], check, diff, run, find, module))
        result['diff'].extend(files.pop('diff', None) or [])
        result['files'] = files
        done.append('files')
    if p['resync_code'] is not None:
        # pylint: disable-next=import-outside-toplevel
        from ansible_collections.ipmasq.agent.plugins.module_utils._resync_roots import outcome
        code_written, code_removed, root = part('resync_code', lambda: code_part(p['resync_code'], check, run))
        result['resync_code'] = outcome(root, code_written, code_removed, check)[0]
        done.append('resync_code')
    written = (result['files'] or {}).get('changed_paths') or []
    if any(path in written for path in p['daemon_reload_for']):
        result['daemon_reloaded'] = True
        systemctl = find('systemctl')
        if not check and systemctl:
            def reload():
                rc, out, err = run([systemctl, 'daemon-reload'])
                if rc != 0:
                    raise MasqError('systemctl daemon-reload failed (rc=%d): %s' % (rc, (err or out).strip()),
                                    rc=rc, stdout=out, stderr=err)
            part('daemon_reload', reload)
    if p['resync_code'] is not None:
        gone = part('resync_code', lambda: code_sweep(p['resync_code'], root, check, result['daemon_reloaded'],
                                                      written, run, find))
        code, code_diff = outcome(root, code_written, code_removed, check, gone)
        if code['changed']:
            result['diff'].append(code_diff)
        result['resync_code'] = code
    result['tools'] = installed_tools(find)
    if chain is not None:
        options, policy = chain
        tools = needed_tools(options['backend'])
        needed = options['state'] == 'present' and bool(tools) and not any(find(tool) for tool in tools)
        if needed:
            result['packages_needed'] = True
        else:
            applied = part('chain', lambda: apply_checked(options, policy, check, diff, run, find))
            chain_diff = applied.pop('diff', None)
            if chain_diff:
                result['diff'].extend(split_by_table(chain_diff['before'], chain_diff['after']))
            result['chain'] = applied
            done.append('chain')
    result['units'] = unit_states(p['units'], run, find)
    if p['daemons'] is not None:
        result['daemons'] = daemons_part(p['daemons'], run, find, module)
        result['daemons_needed'] = [name for name, found in result['daemons'].items() if found['needed']]
        report = p['daemons'].get('report') or []
        for name, found in result['daemons'].items():
            # Where the role runs none of the daemon modules, their warnings are
            # ours; so are always those of a daemon it only reports on.
            if not result['daemons_needed'] or name in report:
                result['warnings'].extend(found['warnings'])
    if p['daemon'] is not None:
        ran = part('daemon', lambda: daemon_part(p['daemon'], check, run, find, module))
        result['diff'].extend(ran.pop('diff', None) or [])
        result['daemon'] = ran
        done.append('daemon')
    if p['audit'] is not None and not result['packages_needed'] and not result['daemons_needed']:
        # pylint: disable=import-outside-toplevel
        # Start-up cost: a node run imports only the parts it runs.
        from ansible_collections.ipmasq.agent.plugins.module_utils._audit.report import offender_lines
        # Start-up cost, likewise.
        from ansible_collections.ipmasq.agent.plugins.module_utils._snat_sources import inspect
        # Check mode's advice says what this run would do where its policy step would write.
        would = check and bool((result['chain'] or {}).get('changed'))
        audited = part('audit', lambda: inspect(audit, would, diff, run, find))
        result['problems'] = [] if audited['only_ours'] else offender_lines(audited, audit['advice'], would)
        result['audit'] = audited
        done.append('audit')
    for name in done:
        result['warnings'].extend(result[name].pop('warnings', None) or [])
    # A daemon-reload alone is no change (as with systemd_service's daemon_reload): it follows a written unit.
    result['changed'] = any(result[name].get('changed') for name in done)
    result['msg'] = node_msg(result, check)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='dict'),
            resync_code=dict(type='dict'),
            daemon_reload_for=dict(type='list', elements='path', default=[]),
            chain=dict(type='dict'),
            allow_catch_all=dict(type='bool', default=False),
            units=dict(type='list', elements='str', default=[]),
            daemons=dict(type='dict'),
            daemon=dict(type='dict'),
            audit=dict(type='dict'),
        ),
        supports_check_mode=True,
    )
    run_module(module, node_step)


if __name__ == '__main__':
    main()
