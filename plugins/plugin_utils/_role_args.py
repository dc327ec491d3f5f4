# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""The ip_masq role's variables, converted and validated once, on the controller.

:func:`role_args` takes what ``_role_vars.read`` made of the role's
``ip_masq_*`` variables of one host as given (typed YAML, ``-e key=value``
strings, JSON, templated Jinja: converted with ansible-core's own
conversions, ``ArgumentSpecValidator`` on the role's argument spec, as
``validate_argument_spec`` does; names and paths checked) and returns the
typed values and what the node needs (the ``masq_chain`` arguments, typed,
the normalised lists the config file is written from, the daemons' modes
and steps), or raises :class:`RoleArgsError` with every problem at once,
types and values together, one line each naming the role variable and the
host. The node gets typed values only, and its own spec types them again.

Where each rule lives (one home each):

- the policy's rules (interface names, extensions beside
  ``rule_format: upstream``, masquerade_cidrs' conflicts, a listed
  destination shadowed by link-local, exceptions outside the kept ranges, a
  family without sources, the CIDR limit, Go durations, and, last, the whole
  ``Policy`` the node will build: chain name, to_ports, ...) come from the
  core (``module_utils/_core``), which needs the standard library only: one
  call (``policy_findings.check``) returns every finding, and this file only
  words them for the role (:data:`_WORDS`);
- the per-entry messages of the CIDR lists and of ``ip_masq_snat_to`` (with
  their index, what to write instead, duplicates refused, a list that covers
  a whole family refused) are the netaddr filters' checks (``nonmasq_guard``,
  ``snat_to``, in plugin_utils), called here as Python functions: only they report every bad
  entry at once in the words the role's users know, and only they aggregate
  a list to find the catch-all;
- which ``ip_masq_*`` names are variables (the role's spec, the
  collection's playbooks' entry point ``playbooks``, the user's own in
  ``ip_masq_user_vars``) and what a path variable may be (absolute,
  normalised, no ``..``) are ``_role_vars``'s, as are the role's files
  and the typing; the characters of the paths
  written into the systemd units are the role's own rule (:data:`SAFE_PATH`).
"""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleError, AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.plugin_utils._nonmasq_guard import nonmasq_guard
from ansible_collections.ipmasq.agent.plugins.plugin_utils._snat_to import snat_to
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.allow import parse_allow
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import policy_findings
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.golang import parse_duration
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import OPTIONS, POLICY_OPTIONS, role_variable
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import DEFAULT_NONMASQ_CIDRS
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry

# Paths that go into the systemd units: absolute, and only characters that
# need no quoting there (\Z: no trailing newline either).
SAFE_PATH = re.compile(r'/[A-Za-z0-9_.+@/-]*\Z')
PATH_VARIABLES = ('ip_masq_lib_dir', 'ip_masq_state_dir', 'ip_masq_config_path', 'ip_masq_python',
                  'ip_masq_unit_dir', 'ip_masq_tmpfiles_dir', 'ip_masq_metrics_dir')
_UNIT_PATH = ('"%s" is written into the resync\'s systemd units: only letters, digits and _ . + @ - / (no '
              'spaces, quotes or other characters systemd would need quoted).')
# masq_chain's options that the role passes (the options table's, but adopt_chain).
_MODULE_OPTIONS = tuple(o.name for o in OPTIONS if o.module and o.role)
_FAMILY = {4: 'IPv4', 6: 'IPv6'}
# The resync timer counts in milliseconds.
_MS_PER_SECOND = 1000
_V6_OFF = ('%s of %s: IPv6 CIDRs %s are listed but ip_masq_enable_ipv6 is false '
           '(set it to true, or remove them).')
_OVER_LIMIT = ('%s of %s: %d CIDRs is over ip_masq_cidr_limit %s '
               '(see the ipmasq.agent.cidr_aggregate filter, or raise the limit).')


class RoleArgsError(AnsibleError):
    """The role's variables of one host are refused; the message names the variable and the host."""


# A filter's message, "ipmasq.agent.FILTER: N problems in LABEL (M entries): ...",
# as the role's: "LABEL: N problems in M entries: ..." (LABEL: the variable of the host).
_FILTER_MESSAGE = re.compile(r'^ipmasq\.agent\.\w+: (\d+ problems? in) (.+?) \((\d+ entr(?:y|ies))\): ', re.S)


def _filtered(problems, variable, plugin, value, **options):
    """A filter's result, or its message as one problem naming the variable and the host."""
    try:
        return plugin(value, **options)
    except AnsibleFilterError as exc:
        problems.bad.add(variable)
        problems.append(' '.join(_FILTER_MESSAGE.sub(r'\2: \1 \3: ', _text(exc)).split()))
        return None


def _text(exc):
    message = getattr(exc, 'message', None)
    return message if isinstance(message, str) else str(exc)


# The normalised list (a fact of the result) of each list option, in the
# order they are checked; the config file and masq_chain's arguments are
# written from these.
LIST_FACTS = {'nonmasquerade_cidrs': '__ip_masq_cidrs', 'exception_cidrs': '__ip_masq_exceptions',
              'masquerade_cidrs': '__ip_masq_masquerade', 'source_cidrs': '__ip_masq_sources',
              'snat_to': '__ip_masq_snat_to'}
_LISTS = tuple((fact, role_variable(option)) for option, fact in LIST_FACTS.items())


def _normalise(values, problems):
    """The lists, normalised by the filters (every bad list is a problem; its fact is None)."""
    label = '%s of ' + problems.host
    upstream = values['ip_masq_rule_format'] == 'upstream'
    out = {}
    if 'ip_masq_nonmasquerade_cidrs' not in problems.bad and 'ip_masq_allow_catch_all' not in problems.bad:
        out['__ip_masq_cidrs'] = _filtered(
            problems, 'ip_masq_nonmasquerade_cidrs', nonmasq_guard, values['ip_masq_nonmasquerade_cidrs'],
            allow_catch_all=values['ip_masq_allow_catch_all'], option_hints=False,
            duplicates='keep' if upstream else 'error', label=label % 'ip_masq_nonmasquerade_cidrs')
    for fact, variable in _LISTS[1:4]:
        if variable not in problems.bad:
            out[fact] = _filtered(problems, variable, nonmasq_guard, values[variable], allow_catch_all=True,
                                  option_hints=False, label=label % variable)
    if 'ip_masq_snat_to' not in problems.bad and 'ip_masq_enable_ipv6' not in problems.bad:
        out['__ip_masq_snat_to'] = _filtered(problems, 'ip_masq_snat_to', snat_to, values['ip_masq_snat_to'],
                                             ipv6=values['ip_masq_enable_ipv6'], label=label % 'ip_masq_snat_to')
    for fact, _variable in _LISTS:
        out.setdefault(fact, None)
    out['__ip_masq_default_list'] = bool(
        (upstream or out['__ip_masq_masquerade']) and out['__ip_masq_cidrs'] == list(DEFAULT_NONMASQ_CIDRS))
    return out


def _ok(problems, *variables):
    return not any(variable in problems.bad for variable in variables)


def _role_checks(values, problems):
    """The role's own rules: the unit paths' characters, and a daemon to
    ``manage`` with no directory to look in."""
    for name in PATH_VARIABLES:
        if _ok(problems, name) and values[name] is not None and not SAFE_PATH.match(values[name]):
            problems.add(name, _UNIT_PATH % values[name])
    for daemon in registry.DAEMONS:
        empty = [name for name, (_option, entry) in sorted(daemon.variables.items())
                 if entry.get('type') == 'list' and entry.get('elements') == 'path' and _ok(problems, name)
                 and values.get(name) == []]
        if empty and values.get(daemon.variable) == 'manage' and _ok(problems, daemon.variable):
            problems.add(daemon.variable, 'manage fails where none of the directories of %s exists, and %s %s: '
                         'give the directories, or set %s: auto.'
                         % (' and '.join(empty), ' and '.join(empty), 'is []' if len(empty) == 1 else 'are []',
                            daemon.variable))


EXPLAIN = 'ip_masq_explain_flows'


def _explain_flows(values, problems):
    """The flows of ip_masq_explain_flows, each checked as the snat_explain
    module checks it and given as its arguments (strings, empty keys left
    out); each bad one is a problem naming its index, its key and the value."""
    if not values.get(EXPLAIN) or not _ok(problems, EXPLAIN):
        return []
    # Start-up cost: the flow's checks are loaded only where flows are given.
    from ansible_collections.ipmasq.agent.plugins.plugin_utils._explain_summary import (  # pylint: disable=import-outside-toplevel
        FLOW_KEYS,
        FlowError,
        checked_flow,
    )
    flows = []
    for index, given in enumerate(values[EXPLAIN]):
        try:
            flows.append(checked_flow(given, ask=False))
        except FlowError as exc:
            key, colon, rest = str(exc).partition(': ')
            if colon and key in FLOW_KEYS:
                problems.add(EXPLAIN, rest, where='[%d].%s' % (index, key))
            else:
                problems.add(EXPLAIN, str(exc), where='[%d]' % index)
    return flows


def _options(values, facts):
    """The policy's options (the options table's names) as the role's checks left them."""
    return dict((o.name, facts.get(LIST_FACTS[o.name]) if o.name in LIST_FACTS else values.get(o.role))
                for o in OPTIONS if o.role)


def _bad_options(problems):
    return set(o.name for o in OPTIONS if o.role in problems.bad)


def _is_are(items, one, more):
    return one if len(items) == 1 else more


def _conflict(other):
    if other == 'exception_cidrs':
        return 'list the exceptions in ip_masq_masquerade_cidrs instead.'
    return ('with ip_masq_masquerade_cidrs, every destination it does not list already keeps its source (%s, or '
            'remove ip_masq_masquerade_cidrs).'
            % ('leave ip_masq_nonmasquerade_cidrs at its default' if other == 'nonmasquerade_cidrs'
               else 'set ip_masq_nomasq_all_reserved_ranges: false'))


# The role's words for each finding of the core (module_utils/_core/model/policy_findings.py):
# (variable, host, detail) -> (whether it refuses the variable itself, the line).
_WORDS = {
    'v6_off': lambda v, h, d: (False, _V6_OFF % (v, h, ', '.join(d))),
    'over_limit': lambda v, h, d: (False, _OVER_LIMIT % (v, h, d[0], d[1])),
    'extensions_upstream': lambda v, h, d: (False, (
        '%s of %s: extensions of ipmasq.agent, which the upstream agent does not have, but ip_masq_rule_format is '
        'upstream (the rules exactly as the upstream agent writes them). Set ip_masq_rule_format: docs, or remove '
        'them.' % (', '.join(role_variable(name) for name in d), h))),
    'masquerade_conflict': lambda v, h, d: (False, '%s of %s cannot be combined with %s: %s'
                                            % (v, h, role_variable(d), _conflict(d))),
    'shadowed_by_link_local': lambda v, h, d: (False, (
        '%s of %s: %s %s inside link-local, which keeps its source while ip_masq_masq_link_local (IPv6: '
        'ip_masq_masq_link_local_ipv6) is false, so it would never be masqueraded. Set ip_masq_masq_link_local: '
        'true (link-local is then masqueraded only where listed), or remove it.'
        % (v, h, ', '.join(d), _is_are(d, 'lies', 'lie')))),
    'outside_kept': lambda v, h, d: (False, (
        '%s of %s: %s %s not inside ip_masq_nonmasquerade_cidrs (nor link-local while it is kept, nor the reserved '
        'ranges of ip_masq_nomasq_all_reserved_ranges): such traffic gets a new source address anyway. An exception '
        'names a part of a kept range to masquerade; remove it, or add the range it belongs to to '
        'ip_masq_nonmasquerade_cidrs.' % (v, h, ', '.join(d), _is_are(d, 'is', 'are')))),
    'missing_source_family': lambda v, h, d: (False, (
        '%s of %s lists no %s source while ip_masq_enable_ipv6 is true: %s traffic would never get a new source '
        'address. Add the %s pod CIDR, or set ip_masq_enable_ipv6: false.'
        % ((v, h) + (' and '.join(_FAMILY[f] for f in d),) * 3))),
    'not_interface_names': lambda v, h, d: (False, (
        '%s of %s: %s %s (1 to 15 letters, digits and _ . -, not starting with -; no wildcards such as eth+ or eth*).'
        % (v, h, ', '.join(json.dumps(n) for n in d),
           _is_are(d, 'is not an interface name', 'are not interface names')))),
    'core': lambda v, h, d: (True, d),
    'duration': lambda v, h, d: (True, d),
    'not_positive': lambda v, h, d: (True, '%s is not a positive Go duration such as 60s, 1m0s or 1h30m.' % d),
    'under_a_millisecond': lambda v, h, d: (True, (
        '%s is shorter than a millisecond: the resync timer counts in milliseconds, so systemd would get 0 '
        '(OnUnitActiveSec=0s) and not repeat it. Use 1ms or more, such as 60s.' % d)),
}


def _timer(interval):
    """``(finding, timer)`` of the resync interval (a Go duration): the
    systemd timer's OnUnitActiveSec= (whole seconds, else milliseconds), or
    the finding that refuses it (``timer`` then None)."""
    try:
        seconds = parse_duration(interval)
    except MasqError as exc:
        return ('duration', 'resync_interval', exc.msg), None
    if not seconds > 0:
        return ('not_positive', 'resync_interval', interval), None
    # The go_duration filter's seconds, in milliseconds.
    ms = int(round(seconds * _MS_PER_SECOND))
    if ms <= 0:
        return ('under_a_millisecond', 'resync_interval', interval), None
    return None, '%ds' % (ms // _MS_PER_SECOND) if ms % _MS_PER_SECOND == 0 else '%dms' % ms


def _word(problems, found):
    """The core's findings as the role's problems, each naming its variable and the host."""
    for kind, option, detail in found:
        variable = role_variable(option)
        refuses, text = _WORDS[kind](variable, problems.host, detail)
        if refuses:
            problems.add(variable, text)
        else:
            problems.append(text)


def _masq_chain_args(values, facts):
    """masq_chain's arguments, typed (the default list and a null random_fully left out: the module's default)."""
    args = {}
    for name in _MODULE_OPTIONS:
        if name in LIST_FACTS:
            args[name] = facts[LIST_FACTS[name]]
        elif name != 'state':
            args[name] = values[role_variable(name)]
    if facts['__ip_masq_default_list']:
        del args['nonmasquerade_cidrs']
    if args['random_fully'] is None:
        del args['random_fully']
    args['state'] = 'present'
    return args


def daemon_modes(values):
    """``[(daemon, mode)]`` for every registered daemon, in the registry's
    order, with a deprecated choice replaced by its new one; and the
    deprecation messages."""
    out, deprecations = [], []
    for daemon in registry.DAEMONS:
        mode = values[daemon.variable]
        if mode in daemon.deprecated:
            new = daemon.deprecated[mode]
            deprecations.append('%s: %s is deprecated, use %s (the same).' % (daemon.variable, mode, new))
            mode = new
        out.append((daemon, mode))
    return out, deprecations


def daemon_step(daemon, mode, state, backup_dir, values):
    """One daemon of the role's daemon step (other_snat.yml): its name, whether
    it is managed, and the options of its module's edit and, after its
    restart, its clean-up (present only)."""
    base = dict({'state': state, 'backup_dir': backup_dir}, **daemon.options(values, mode))
    edit = dict(base, **daemon.edit)
    cleanup = None
    if state == 'present' and daemon.cleanup is not None:
        cleanup = dict(base, **daemon.cleanup)
    return {'name': daemon.name, 'manage': mode == 'manage', 'edit': edit, 'cleanup': cleanup}


def _core_message(exc, host):
    """A core (node-side) refusal, naming the role variable: ``chain: ...`` becomes ``ip_masq_chain of HOST: ...``."""
    option, colon, rest = exc.msg.partition(': ')
    if colon and option in _MODULE_OPTIONS:
        return '%s of %s: %s' % (role_variable(option), host, rest)
    return 'ip_masq role variables of %s: %s' % (host, exc.msg)


def role_args(given) -> dict:
    """Check the ip_masq role's variables of one host on the controller:
    ``given`` is what :func:`_role_vars.read` made of them (typed by the
    role's spec, names and paths checked; its problems so far).

    Returns ``{'state', 'values', 'masq_chain', 'facts', 'timer', 'daemons',
    'deprecations', 'daemon_steps', 'explain_flows'}``: the typed values, masq_chain's typed
    arguments, the normalised lists (``__ip_masq_cidrs``,
    ``__ip_masq_exceptions``, ``__ip_masq_masquerade``,
    ``__ip_masq_sources``, ``__ip_masq_snat_to``, ``__ip_masq_default_list``;
    none with state absent), the resync timer's value, and the daemons'
    (:func:`daemon_modes`: every registered daemon's mode, the deprecation
    messages; :func:`daemon_step`: the step of each daemon not ``skip``, by
    name), and the checked flows of ``ip_masq_explain_flows`` (none with
    state absent).  Raises :class:`RoleArgsError` with every problem (``given``'s
    first), one line each naming the variable and the host; last, anything
    else the node's core refuses in the policy built from the same
    arguments.
    """
    typed, problems = given.typed, given.problems.copy()
    host = problems.host
    # Removal (a state of absent that is itself fine) needs only the chain's name.
    present = typed.get('ip_masq_state') != 'absent' or 'ip_masq_state' in problems.bad
    facts = _normalise(typed, problems) if present else {}
    flows = []
    if present:
        _role_checks(typed, problems)
        flows = _explain_flows(typed, problems)
    # What the role's own checks left goes to the readers that own the rest,
    # each asked once: the resync timer's Go duration, the audit's allow
    # list, the policy's rules. Their verdicts are then worded here, in one
    # place (the timer's first, the allow list's last).
    options, bad = _options(typed, facts), _bad_options(problems)
    timing, timer = _timer(typed['ip_masq_resync_interval']) if present and _ok(problems, 'ip_masq_resync_interval') \
        else (None, None)
    refused_allow = None
    if present and _ok(problems, 'ip_masq_audit_allow'):
        try:
            parse_allow(typed['ip_masq_audit_allow'])
        except MasqError as exc:
            refused_allow = exc.msg.partition(': ')[2] or exc.msg
    found = policy_findings.check(options, bad, present=present)
    _word(problems, ([timing] if timing else []) + found)
    if refused_allow:
        problems.add('ip_masq_audit_allow', refused_allow)
    if problems:
        raise RoleArgsError('\n'.join(problems))
    modes, deprecations = daemon_modes(typed)
    daemons = {'daemons': modes, 'deprecations': deprecations, 'explain_flows': flows, 'daemon_steps': dict(
        (d.name, daemon_step(d, mode, typed['ip_masq_state'], typed['ip_masq_backup_dir'], typed))
        for d, mode in modes if mode != 'skip')}
    if not present:
        return dict(daemons, state='absent', values=typed, facts={}, timer=None,
                    masq_chain={'chain': typed['ip_masq_chain'], 'state': 'absent'})
    args = _masq_chain_args(typed, facts)
    try:
        Policy(**dict((key, args[key]) for key in POLICY_OPTIONS if key in args))
    except MasqError as exc:
        raise RoleArgsError(_core_message(exc, host)) from None
    return dict(daemons, state='present', values=typed, masq_chain=args, facts=facts, timer=timer)
