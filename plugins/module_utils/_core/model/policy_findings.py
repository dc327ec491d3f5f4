# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Every problem of a set of policy options at once, as findings.

:class:`~policy.Policy` refuses the first problem it meets, in the node's
words.  The controller (the role, ``plugin_utils/_role_args.py``) wants
every problem of a host at once, each naming its role variable: it asks
:func:`findings` once with the options as the checks left them, and words
what comes back.  The rules are the policy's own (``policy.py``,
``cidrs.py``, ``intervals.py``): this file only runs them
over all the options together, in the order the role reports them.

A finding is ``(kind, option, detail)``: ``kind`` names the rule,
``option`` the option it is about (a name of the options table), ``detail``
what the words need (the offending entries, the other option ...).

Standard library only: the core runs on nodes too.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.cidrs import over_limit
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.intervals import cidrs_touching
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import (
    cidr_family, extensions_given, is_interface_name, masquerade_conflicts, missing_source_families,
    outside_kept, parse_to_ports, shadowed_by_link_local, validate_chain_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.ranges import (
    DEFAULT_NONMASQ_CIDRS, LINK_LOCAL, RESERVED_RANGES,
)

FAMILIES = (4, 6)
# The options whose lists an IPv6 entry needs ipv6 for, in the order reported.
_V6_LISTS = ('exception_cidrs', 'masquerade_cidrs', 'source_cidrs')
_LISTS = ('nonmasquerade_cidrs',) + _V6_LISTS
# The single-option rules of the core, and the options they check.
_SINGLE = (('chain', validate_chain_name), ('to_ports', parse_to_ports))


def single(options, bad=()):
    """The findings of the core's single-option rules (chain name, to_ports)."""
    out = []
    for name, rule in _SINGLE:
        if name in options and name not in bad:
            try:
                rule(options[name])
            except MasqError as exc:
                out.append(('core', name, exc.msg.partition(': ')[2] or exc.msg))
    return out


def check(o, bad=(), present=True):
    """Every finding of the options ``o`` (name -> value; the CIDR lists
    canonical, None where a list was refused), in the order reported.
    ``bad``: the options already refused on their own (their rules are not
    run again, nor those that need them).  With ``present`` false (the
    policy is being removed) only the chain's name matters."""
    # Each option on its own first (with the policy removed, only the chain's
    # name); reported after the rules across options.
    each = single(o if present else {'chain': o['chain']}, bad)
    return _combinations(o, bad) + each if present else each


def _combinations(o, bad):
    """The findings of the rules across options (see :func:`check`)."""
    out = []
    ok = set(o) - set(bad)
    cidrs, exceptions = o['nonmasquerade_cidrs'], o['exception_cidrs']
    masquerade, sources = o['masquerade_cidrs'], o['source_cidrs']
    ipv6, limit, reserved = o['ipv6'], o['cidr_limit'], o['nomasq_all_reserved_ranges']
    masq_link_local = {4: o['masq_link_local'], 6: o['masq_link_local_ipv6']}
    masq_mode = bool(masquerade)
    # The IPv6 entries of each list (not refused), found once.
    v6 = dict((name, [c for c in o[name] if cidr_family(c) == 6]) for name in _LISTS if o[name])
    v6_ok, limit_ok = 'ipv6' in ok, 'cidr_limit' in ok
    over = dict((name, o[name] is not None and limit_ok and over_limit(len(o[name]), limit))
                for name in ('nonmasquerade_cidrs', 'masquerade_cidrs'))
    if v6_ok and v6.get('nonmasquerade_cidrs') and not ipv6:
        out.append(('v6_off', 'nonmasquerade_cidrs', v6['nonmasquerade_cidrs']))
    if masquerade is not None and not masq_mode and over['nonmasquerade_cidrs']:
        out.append(('over_limit', 'nonmasquerade_cidrs', (len(cidrs), limit)))
    ext_v6 = {}
    if v6_ok and not ipv6:
        for name in _V6_LISTS:
            if v6.get(name):
                ext_v6[name] = v6[name]
                out.append(('v6_off', name, ext_v6[name]))
    given = extensions_given({'exception_cidrs': exceptions or [], 'masquerade_cidrs': masquerade or [],
                              'snat_to': o['snat_to'] or [], 'source_cidrs': sources or [],
                              'out_interfaces': o['out_interfaces'] if 'out_interfaces' in ok else []})
    if o['rule_format'] == 'upstream' and given:
        out.append(('extensions_upstream', 'rule_format', given))
    reserved_ok = 'nomasq_all_reserved_ranges' in ok
    if masq_mode and cidrs is not None and exceptions is not None and reserved_ok:
        for other in masquerade_conflicts(cidrs == list(DEFAULT_NONMASQ_CIDRS), reserved, exceptions):
            out.append(('masquerade_conflict', 'masquerade_cidrs', other))
    if over['masquerade_cidrs']:
        out.append(('over_limit', 'masquerade_cidrs', (len(masquerade), limit)))
    link_local_ok = 'masq_link_local' in ok and 'masq_link_local_ipv6' in ok
    if masq_mode and not ext_v6 and link_local_ok:
        shadowed = [c for c in masquerade if shadowed_by_link_local(c, cidr_family(c), masq_link_local)]
        if shadowed:
            out.append(('shadowed_by_link_local', 'masquerade_cidrs', shadowed))
    if (masquerade is not None and not masq_mode and exceptions and cidrs is not None and not ext_v6 and link_local_ok
            and reserved_ok):
        kept = list(cidrs) + [LINK_LOCAL[f] for f in FAMILIES if not masq_link_local[f]]
        kept += list(RESERVED_RANGES) if reserved else []
        outside = outside_kept(exceptions, kept)
        # Those that overlap a kept range first, then the others (as the cidr_overlaps filter sorts them).
        touching = cidrs_touching(outside, kept)
        outside = touching + [c for c in outside if c not in touching]
        if outside:
            out.append(('outside_kept', 'exception_cidrs', outside))
    if sources and v6_ok and ipv6:
        missing = missing_source_families({4: [c for c in sources if cidr_family(c) == 4], 6: v6['source_cidrs']},
                                          FAMILIES)
        if missing:
            out.append(('missing_source_family', 'source_cidrs', missing))
    if 'out_interfaces' in ok:
        names = o['out_interfaces']
        not_names = [n for n in names if not is_interface_name(n) and n not in ('.', '..')]
        not_names += [n for n in names if n in ('.', '..')]
        if not_names:
            out.append(('not_interface_names', 'out_interfaces', not_names))
    return out
