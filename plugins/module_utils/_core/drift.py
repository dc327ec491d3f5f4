# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Which rules drifted: the rules a policy wants that the node lacks, and the
rules the node holds that the policy does not want, as rule text.

The plans say that a chain or table is rewritten and count its rules
("3 rules -> 4 rules"); this says which ones. Only a run that rewrites pays
for it (a no-drift run never calls it).

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_save import rule_key
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nft_json import render_rule
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_rules import CHAIN, canonical_text, element_texts


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


def iptables_chain(live, wanted):
    """:func:`compare` of our iptables chain's rules as read and as wanted
    (``iptables-save`` lines); None when they are the same."""
    drift = compare(live, wanted, rule_key)
    return drift if drift['missing'] or drift['extra'] or drift['reordered'] else None


def nft_table(table, desired):
    """Our nftables table as read (``nft_json.NftTable``) against the one
    wanted (``nftables_rules.Desired``): ``{'rules': compare(...), 'sets': {name:
    {'missing': [...], 'extra': [...]}}}`` with the rules of our chain in nft
    syntax and the elements of each set that differs as nft lists them.
    None when the table cannot be read as JSON."""
    if table is None or table.unreadable is not None:
        return None
    live_rules = table.rules.get(CHAIN, [])
    live = [render_rule(r) for r in live_rules]
    # A rule whose anonymous set nft lists in its own order is the same rule (nftables.same_rules).
    canon = {}
    for text, expr, comment in ([(t, r.get('expr', []), r.get('comment')) for t, r in zip(live, live_rules)]
                                + [(t, e, c) for t, (e, c) in zip(desired.rule_texts(), desired.rules)]):
        canon[text] = canonical_text(expr, comment)
    out = {'rules': compare(live, desired.rule_texts(), canon.get),
           'sets': {}}
    for name in sorted(desired.set_cidrs):
        live = (table.sets.get(name) or {}).get('elem') or []
        found = compare(element_texts(live), element_texts(desired.elements[name]))
        if found['missing'] or found['extra']:
            out['sets'][name] = {'missing': found['missing'], 'extra': found['extra']}
    return out


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


def action_words(result, action, said):
    """The rules a sync ``result``'s rewrite ``action`` puts back or takes
    out, as words to follow the action in a log line ('' for any other
    action). A family's drift spans its chain and sub-chains: it is said
    once, with the first rewrite of that family (``said``, a set, records
    which ones were)."""
    for key, prefix in (('ipv4', 'IPv4: rewrite chain '), ('ipv6', 'IPv6: rewrite chain '),
                        ('nftables', 'nftables: rewrite ')):
        if not action.startswith(prefix):
            continue
        if key in said:
            return ''
        said.add(key)
        found = (result.get(key) or {}).get('drift')
        if not found:
            return ''
        if key != 'nftables':
            return describe(found)
        words = []
        if describe(found.get('rules') or {}):
            words.append('chain %s: %s' % (CHAIN, describe(found['rules'])))
        for name, change in sorted((found.get('sets') or {}).items()):
            words.append('set %s: %s' % (name, describe(change)))
        return '; '.join(words)
    return ''
