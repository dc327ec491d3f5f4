# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Which rules drifted: the rules a policy wants that the node lacks, and the
rules the node holds that the policy does not want, as rule text.

The plans say that a chain or table is rewritten and count its rules
("3 rules -> 4 rules"); this says which ones, in words any backend uses:
each compares its own rules with :func:`compare` (``iptables_rules.chain_drift``,
``nftables.table_drift``) and says them with :func:`describe` (its
``drift_words`` and ``drift_report``). Only a run that rewrites pays for it
(a no-drift run never calls it).

Standard library only: this file runs on managed nodes.
"""


def _same(text):
    return text


def compare(live, wanted, key=None):
    """``{'missing': [...], 'extra': [...], 'reordered': bool}``.

    ``missing``: the rules of ``wanted`` that ``live`` lacks, ``extra``: the
    rules of ``live`` that ``wanted`` lacks, each in its own list's order and
    as its own list writes it (a rule listed twice and wanted once is extra
    once). ``key(rule)`` says which texts are the same rule (default: equal
    text). ``reordered``: the same rules, in another order (order matters:
    a RETURN after the MASQUERADE returns nothing)."""
    # Imported here: only a run that rewrites compares, and a no-drift resync cycle
    # (a fresh interpreter) would pay about 1.5 ms of CPU for the import alone.
    import collections  # pylint: disable=import-outside-toplevel

    key = key or _same
    live_keys = [key(rule) for rule in live]
    wanted_keys = [key(rule) for rule in wanted]
    have = collections.Counter(live_keys)
    need = collections.Counter(wanted_keys)
    missing = []
    for rule, k in zip(wanted, wanted_keys):
        if have[k] > 0:
            have[k] -= 1
        else:
            missing.append(rule)
    extra = []
    for rule, k in zip(live, live_keys):
        if need[k] > 0:
            need[k] -= 1
        else:
            extra.append(rule)
    return {'missing': missing, 'extra': extra,
            'reordered': not missing and not extra and live_keys != wanted_keys}


# How many rules of each kind (missing, extra) a journal line names.
SHOWN = 5


def describe(drift):
    """One :func:`compare` result as words (at most SHOWN rules of each kind);
    '' when it names nothing."""
    parts = []
    for kind in ('missing', 'extra'):
        rules = drift.get(kind) or []
        if rules:
            more = ' (and %d more)' % (len(rules) - SHOWN) if len(rules) > SHOWN else ''
            parts.append('%s %s%s' % (kind, ', '.join('`%s`' % r for r in rules[:SHOWN]), more))
    if drift.get('reordered'):
        parts.append('the same rules in another order')
    return ', '.join(parts)
