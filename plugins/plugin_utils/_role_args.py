# Copyright: contributors to the ipmasq.agent collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""The ip_masq role's variables, validated once, on the controller.

:func:`role_args` takes the role's ``ip_masq_*`` variables of one host and
returns what the role's later steps need (the ``masq_chain`` arguments, the
normalised lists the config file template reads), or raises
:class:`RoleArgsError` with the message roles/ip_masq/tasks/validate.yml
gave, naming the role variable and the host.

Where each rule lives (one home each):

- the policy's rules (interface names, extensions beside
  ``rule_format: upstream``, masquerade_cidrs' conflicts, a listed
  destination shadowed by link-local, exceptions outside the kept ranges, a
  family without sources, the CIDR limit, Go durations, and, last, the whole
  ``Policy`` the node will build: chain name, to_ports, ...) come from the
  core (``module_utils/_core``), which needs the standard library only;
  this file only words them for the role;
- the per-entry messages of the CIDR lists and of ``ip_masq_snat_to`` (with
  their index, what to write instead, duplicates refused, a list that covers
  a whole family refused) are the netaddr filters' (``nonmasq_guard``,
  ``snat_to``), called here as Python functions: only they report every bad
  entry at once in the words the role's users know, and only they aggregate
  a list to find the catch-all;
- the paths written into the systemd units are the role's own rule
  (:data:`SAFE_PATH`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.ipmasq.agent.plugins.filter.go_duration import go_duration
from ansible_collections.ipmasq.agent.plugins.filter.nonmasq_guard import nonmasq_guard
from ansible_collections.ipmasq.agent.plugins.filter.snat_to import snat_to
from ansible_collections.ipmasq.agent.plugins.module_utils._core.cidrs import over_limit
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.intervals import cidr_interval, merge
from ansible_collections.ipmasq.agent.plugins.module_utils._core.policy import (
    Policy, cidr_family, extensions_given, is_interface_name, masquerade_conflicts, missing_source_families,
    outside_kept, shadowed_by_link_local, validate_chain_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.ranges import (
    DEFAULT_NONMASQ_CIDRS, LINK_LOCAL, RESERVED_RANGES,
)

# Paths that go into the systemd units: absolute, and only characters that
# need no quoting there (\Z: no trailing newline either).
SAFE_PATH = re.compile(r'/[A-Za-z0-9_.+@/-]*\Z')
PATH_VARIABLES = ('ip_masq_lib_dir', 'ip_masq_state_dir', 'ip_masq_config_path', 'ip_masq_python',
                  'ip_masq_unit_dir', 'ip_masq_tmpfiles_dir')
# masq_chain's options that the role passes, by role variable (the rest: ip_masq_ + the option).
_ROLE_VARIABLE = {'ipv6': 'ip_masq_enable_ipv6'}
_MODULE_OPTIONS = ('nonmasquerade_cidrs', 'masq_link_local', 'masq_link_local_ipv6', 'nomasq_all_reserved_ranges',
                   'ipv6', 'chain', 'random_fully', 'to_ports', 'jump_position', 'cidr_limit', 'rule_format',
                   'backend', 'exception_cidrs', 'masquerade_cidrs', 'snat_to', 'snat_to_require_local',
                   'source_cidrs', 'out_interfaces')
_BOOL_OPTIONS = ('masq_link_local', 'masq_link_local_ipv6', 'nomasq_all_reserved_ranges', 'ipv6', 'random_fully',
                 'snat_to_require_local')
_FAMILY = {4: 'IPv4', 6: 'IPv6'}
_V6_OFF = ('%s of %s: IPv6 CIDRs %s are listed but ip_masq_enable_ipv6 is false '
           '(set it to true, or remove them).')
_OVER_LIMIT = ('%s of %s: %d CIDRs is over ip_masq_cidr_limit %s '
               '(see the ipmasq.agent.cidr_aggregate filter, or raise the limit).')


class RoleArgsError(AnsibleError):
    """The role's variables of one host are refused; the message names the variable and the host."""


def role_variable(option):
    """The role variable that sets masq_chain's ``option``."""
    return _ROLE_VARIABLE.get(option, 'ip_masq_' + option)


def _bool(value):
    """Jinja's ``| bool`` as the role used it."""
    return boolean(value, strict=False)


def _int(value):
    """Jinja's ``| int`` (0 for what is not a number)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _filtered(plugin, value, **options):
    """A filter's result, or its message as the role's failure."""
    try:
        return plugin(value, **options)
    except AnsibleFilterError as exc:
        raise RoleArgsError(_text(exc)) from None


def _text(exc):
    message = getattr(exc, 'message', None)
    return message if isinstance(message, str) else str(exc)


def _items(value):
    if value is None:
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(',')]
    return list(value)


def _v6(cidrs):
    return [cidr for cidr in cidrs if cidr_family(cidr) == 6]


def _by_family(cidrs):
    return {4: [c for c in cidrs if cidr_family(c) == 4], 6: _v6(cidrs)}


def _touches(cidr, kept):
    """Whether ``cidr`` shares an address with the union of ``kept`` (for the message's order only)."""
    family = cidr_family(cidr)
    first, last = cidr_interval(cidr, family)
    return any(low <= last and high >= first
               for low, high in merge(cidr_interval(c, family) for c in kept if cidr_family(c) == family))


def _normalise(values, host):
    """The lists, normalised, in validate.yml's set_fact order (the first bad list fails)."""
    upstream = values['ip_masq_rule_format'] == 'upstream'
    label = '%s of ' + host
    out = {}
    out['__ip_masq_cidrs'] = _filtered(
        nonmasq_guard, values['ip_masq_nonmasquerade_cidrs'], allow_catch_all=values['ip_masq_allow_catch_all'],
        option_hints=False, duplicates='keep' if upstream else 'error', label=label % 'ip_masq_nonmasquerade_cidrs')
    for fact, variable in (('__ip_masq_exceptions', 'ip_masq_exception_cidrs'),
                           ('__ip_masq_masquerade', 'ip_masq_masquerade_cidrs'),
                           ('__ip_masq_sources', 'ip_masq_source_cidrs')):
        out[fact] = _filtered(nonmasq_guard, values[variable], allow_catch_all=True, option_hints=False,
                              label=label % variable)
    out['__ip_masq_snat_to'] = _filtered(snat_to, values['ip_masq_snat_to'], ipv6=_bool(values['ip_masq_enable_ipv6']),
                                         label=label % 'ip_masq_snat_to')
    out['__ip_masq_default_list'] = bool((upstream or out['__ip_masq_masquerade'])
                                         and out['__ip_masq_cidrs'] == list(DEFAULT_NONMASQ_CIDRS))
    return out


def _problems(values, host, facts):
    """validate.yml's assert: every refused combination, in its order."""
    cidrs, exceptions = facts['__ip_masq_cidrs'], facts['__ip_masq_exceptions']
    masquerade, sources = facts['__ip_masq_masquerade'], facts['__ip_masq_sources']
    ipv6 = _bool(values['ip_masq_enable_ipv6'])
    masq_link_local = {4: _bool(values['ip_masq_masq_link_local']), 6: _bool(values['ip_masq_masq_link_local_ipv6'])}
    reserved = _bool(values['ip_masq_nomasq_all_reserved_ranges'])
    limit = _int(values['ip_masq_cidr_limit'])
    interval = str(values['ip_masq_resync_interval'])
    seconds = _filtered(go_duration, interval)     # a value that is no Go duration fails alone, as it did
    masq_mode = bool(masquerade)
    problems = []

    if _v6(cidrs) and not ipv6:
        problems.append(_V6_OFF % ('ip_masq_nonmasquerade_cidrs', host, ', '.join(_v6(cidrs))))
    if not masq_mode and over_limit(len(cidrs), limit):
        problems.append(_OVER_LIMIT % ('ip_masq_nonmasquerade_cidrs', host, len(cidrs), values['ip_masq_cidr_limit']))
    if not seconds > 0:
        problems.append('ip_masq_resync_interval of %s: %s is not a positive Go duration such as 60s, 1m0s or 1h30m.'
                        % (host, interval))
    paths = [values[name] for name in PATH_VARIABLES] + [values['ip_masq_metrics_dir']] * bool(values['ip_masq_metrics_dir'])
    bad_paths = [str(path) for path in paths if not (isinstance(path, str) and SAFE_PATH.match(path))]
    if bad_paths:
        problems.append('ip_masq_lib_dir, ip_masq_state_dir, ip_masq_config_path, ip_masq_python, ip_masq_unit_dir, '
                        'ip_masq_tmpfiles_dir and ip_masq_metrics_dir (when set) of %s must be absolute paths of '
                        'letters, digits and _ . + @ - / (not %s).' % (host, ', '.join(bad_paths)))
    ext_v6 = {}
    if not ipv6:
        for variable, listed in (('ip_masq_exception_cidrs', exceptions), ('ip_masq_masquerade_cidrs', masquerade),
                                 ('ip_masq_source_cidrs', sources)):
            if _v6(listed):
                ext_v6[variable] = _v6(listed)
                problems.append(_V6_OFF % (variable, host, ', '.join(_v6(listed))))
    given = extensions_given({'exception_cidrs': exceptions, 'masquerade_cidrs': masquerade,
                              'snat_to': facts['__ip_masq_snat_to'], 'source_cidrs': sources,
                              'out_interfaces': values['ip_masq_out_interfaces']})
    if values['ip_masq_rule_format'] == 'upstream' and given:
        problems.append('%s of %s: extensions of ipmasq.agent, which the upstream agent does not have, but '
                        'ip_masq_rule_format is upstream (the rules exactly as the upstream agent writes them). '
                        'Set ip_masq_rule_format: docs, or remove them.'
                        % (', '.join(role_variable(name) for name in given), host))
    if masq_mode:
        for other in masquerade_conflicts(cidrs == list(DEFAULT_NONMASQ_CIDRS), reserved, exceptions):
            if other == 'exception_cidrs':
                advice = 'list the exceptions in ip_masq_masquerade_cidrs instead.'
            else:
                advice = ('with ip_masq_masquerade_cidrs, every destination it does not list already keeps its '
                          'source (%s, or remove ip_masq_masquerade_cidrs).'
                          % ('leave ip_masq_nonmasquerade_cidrs at its default' if other == 'nonmasquerade_cidrs'
                             else 'set ip_masq_nomasq_all_reserved_ranges: false'))
            problems.append('ip_masq_masquerade_cidrs of %s cannot be combined with %s: %s'
                            % (host, role_variable(other), advice))
    if over_limit(len(masquerade), limit):
        problems.append(_OVER_LIMIT % ('ip_masq_masquerade_cidrs', host, len(masquerade), values['ip_masq_cidr_limit']))
    if masq_mode and not ext_v6:
        shadowed = [c for c in masquerade if shadowed_by_link_local(c, cidr_family(c), masq_link_local)]
        if shadowed:
            problems.append('ip_masq_masquerade_cidrs of %s: %s %s inside link-local, which keeps its source while '
                            'ip_masq_masq_link_local (IPv6: ip_masq_masq_link_local_ipv6) is false, so it would never '
                            'be masqueraded. Set ip_masq_masq_link_local: true (link-local is then masqueraded only '
                            'where listed), or remove it.'
                            % (host, ', '.join(shadowed), 'lies' if len(shadowed) == 1 else 'lie'))
    if not masq_mode and exceptions and not ext_v6:
        kept = list(cidrs) + [LINK_LOCAL[f] for f in (4, 6) if not masq_link_local[f]]
        kept += list(RESERVED_RANGES) if reserved else []
        outside = outside_kept(exceptions, kept)
        # Those that overlap a kept range first, then the others (as the cidr_overlaps filter sorted them).
        outside = [c for c in outside if _touches(c, kept)] + [c for c in outside if not _touches(c, kept)]
        if outside:
            problems.append('ip_masq_exception_cidrs of %s: %s %s not inside ip_masq_nonmasquerade_cidrs (nor '
                            'link-local while it is kept, nor the reserved ranges of '
                            'ip_masq_nomasq_all_reserved_ranges): such traffic gets a new source address anyway. An '
                            'exception names a part of a kept range to masquerade; remove it, or add the range it '
                            'belongs to to ip_masq_nonmasquerade_cidrs.'
                            % (host, ', '.join(outside), 'is' if len(outside) == 1 else 'are'))
    missing = missing_source_families(_by_family(sources), (4, 6)) if sources and ipv6 else []
    if missing:
        families = ' and '.join(_FAMILY[f] for f in missing)
        problems.append('ip_masq_source_cidrs of %s lists no %s source while ip_masq_enable_ipv6 is true: %s traffic '
                        'would never get a new source address. Add the %s pod CIDR, or set ip_masq_enable_ipv6: false.'
                        % (host, families, families, families))
    names = _items(values['ip_masq_out_interfaces'])
    bad = [n for n in names if not isinstance(n, str)]
    bad += [n for n in names if isinstance(n, str) and not is_interface_name(n) and n not in ('.', '..')]
    bad += [n for n in names if isinstance(n, str) and n in ('.', '..')]
    if bad:
        problems.append('ip_masq_out_interfaces of %s: %s %s (1 to 15 letters, digits and _ . -, not starting with -; '
                        'no wildcards such as eth+ or eth*).'
                        % (host, ', '.join(json.dumps(n) for n in bad),
                           'is not an interface name' if len(bad) == 1 else 'are not interface names'))
    return problems


def _masq_chain_args(values, facts):
    """The arguments roles/ip_masq/tasks/apply.yml passes masq_chain (an omitted one is left out)."""
    args = {}
    if not facts['__ip_masq_default_list']:
        args['nonmasquerade_cidrs'] = facts['__ip_masq_cidrs']
    args.update(masq_link_local=values['ip_masq_masq_link_local'],
                masq_link_local_ipv6=values['ip_masq_masq_link_local_ipv6'],
                nomasq_all_reserved_ranges=values['ip_masq_nomasq_all_reserved_ranges'],
                ipv6=values['ip_masq_enable_ipv6'], chain=values['ip_masq_chain'])
    if values['ip_masq_random_fully'] is not None:
        args['random_fully'] = values['ip_masq_random_fully']
    args.update(to_ports=values['ip_masq_to_ports'], jump_position=values['ip_masq_jump_position'],
                cidr_limit=values['ip_masq_cidr_limit'], rule_format=values['ip_masq_rule_format'],
                backend=values['ip_masq_backend'], exception_cidrs=facts['__ip_masq_exceptions'],
                masquerade_cidrs=facts['__ip_masq_masquerade'], snat_to=facts['__ip_masq_snat_to'],
                snat_to_require_local=values['ip_masq_snat_to_require_local'], source_cidrs=facts['__ip_masq_sources'],
                out_interfaces=values['ip_masq_out_interfaces'], state='present')
    return args


def _core_message(exc, host):
    """A core (node-side) refusal, naming the role variable: ``chain: ...`` becomes ``ip_masq_chain of HOST: ...``."""
    option, colon, rest = exc.msg.partition(': ')
    if colon and option in _MODULE_OPTIONS:
        return '%s of %s: %s' % (role_variable(option), host, rest)
    return 'ip_masq role variables of %s: %s' % (host, exc.msg)


def _policy(args):
    """The core's Policy of masq_chain's arguments, as the node will build it (its argument
    spec's conversions: booleans and the limit; the role's argument spec checked the types)."""
    kwargs = {key: args[key] for key in _MODULE_OPTIONS if key in args and key not in ('backend',)}
    for key in _BOOL_OPTIONS:
        if key in kwargs:
            kwargs[key] = _bool(kwargs[key])
    kwargs['cidr_limit'] = _int(kwargs['cidr_limit'])
    kwargs['to_ports'] = [str(port) for port in _items(kwargs['to_ports'])]
    kwargs['out_interfaces'] = [str(name) for name in _items(kwargs['out_interfaces'])]
    return Policy(**kwargs)


def role_args(values: Mapping[str, object], host: str) -> dict:
    """Validate the ip_masq role's variables of ``host`` (``values``: the
    ``ip_masq_*`` variables after defaults/main.yml, templated) on the
    controller.

    Returns ``{'state', 'masq_chain', 'facts'}``: masq_chain's arguments
    (what tasks/apply.yml passes, or with ``ip_masq_state: absent`` what
    tasks/absent.yml passes) and the normalised lists the templates read
    (``__ip_masq_cidrs``, ``__ip_masq_exceptions``, ``__ip_masq_masquerade``,
    ``__ip_masq_sources``, ``__ip_masq_snat_to``, ``__ip_masq_default_list``;
    none with state absent).  Raises :class:`RoleArgsError` naming the
    variable and the host: a bad list alone (the first, in the order
    nonmasquerade, exception, masquerade, source CIDRs, snat_to), a
    resync interval that is no Go duration alone, else every refused
    combination at once; last, anything the node's core refuses in the
    policy built from the same arguments.
    """
    if values['ip_masq_state'] != 'present':
        try:
            validate_chain_name(values['ip_masq_chain'])
        except MasqError as exc:
            raise RoleArgsError(_core_message(exc, host)) from None
        return {'state': 'absent', 'masq_chain': {'chain': values['ip_masq_chain'], 'state': 'absent'}, 'facts': {}}
    facts = _normalise(values, host)
    problems = _problems(values, host, facts)
    if problems:
        raise RoleArgsError('\n'.join(problems))
    args = _masq_chain_args(values, facts)
    try:
        _policy(args)
    except MasqError as exc:
        raise RoleArgsError(_core_message(exc, host)) from None
    return {'state': 'present', 'masq_chain': args, 'facts': facts}
