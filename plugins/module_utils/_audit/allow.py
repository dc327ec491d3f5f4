# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``allow`` option: which other SNAT rules may stay next to ours (by
owner, chain, table and/or a regex on the rule), checked before anything is
read.

Standard library only: this file runs on managed nodes.
"""

import re

from ansible_collections.ipmasq.agent.plugins.module_utils._audit import owners
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError

ALLOW_KEYS = ('owner', 'chain', 'table', 'regex', 'reason')


class AllowEntry:
    def __init__(self, index, owner=None, chain=None, table=None, regex=None, reason=None):
        self.index = index
        self.owner = owner
        self.chain = chain
        self.table = table
        self.pattern = regex
        self.regex = re.compile(regex) if regex is not None else None
        self.reason = reason

    def label(self):
        keys = (('owner', self.owner), ('chain', self.chain), ('table', self.table), ('regex', self.pattern))
        parts = ['%s=%s' % (k, v) for k, v in keys if v is not None]
        text = 'allow[%d] (%s)' % (self.index, ', '.join(parts))
        return text + (': ' + self.reason if self.reason else '')

    def matches(self, src):
        if self.owner is not None and src['owner'] != self.owner:
            return False
        if self.chain is not None and self.chain != src['chain'] and self.chain not in src['path'][1:]:
            return False
        if self.table is not None and self.table not in (src['table'], src['table'].split(' ', 1)[-1]):
            return False
        if self.regex is not None and not self.regex.search(src['rule']):
            return False
        return True


def parse_allow(entries):
    """Validate the ``allow`` option.  Each entry is an owner name, a chain
    name, or a dict with any of ``owner``, ``chain``, ``table``, ``regex``
    (all given keys must match) and an optional ``reason``."""
    if entries is None:
        return []
    if not isinstance(entries, (list, tuple)):
        raise MasqError('allow: must be a list of owner names, chain names or dicts, got %r.' % (entries,))
    parsed = []
    errors = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            text = entry.strip()
            if not text:
                errors.append('allow[%d] is empty' % index)
            elif text.lower() in owners.OWNERS:
                parsed.append(AllowEntry(index, owner=text.lower()))
            else:
                parsed.append(AllowEntry(index, chain=text))
            continue
        if not isinstance(entry, dict):
            errors.append('allow[%d] is %r: use a string or a dict' % (index, entry))
            continue
        unknown = sorted(str(k) for k in entry if k not in ALLOW_KEYS)
        if unknown:
            errors.append('allow[%d] has unknown key(s) %s (known: %s)'
                          % (index, ', '.join(unknown), ', '.join(ALLOW_KEYS)))
            continue
        values = {}
        for key in ALLOW_KEYS:
            value = entry.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not value.strip():
                errors.append('allow[%d].%s must be a non-empty string, got %r' % (index, key, value))
                value = None
            values[key] = value
        if any(v is None for v in values.values()):
            continue
        if not any(k in values for k in ('owner', 'chain', 'table', 'regex')):
            errors.append('allow[%d] needs at least one of owner, chain, table, regex' % index)
            continue
        if 'owner' in values:
            values['owner'] = values['owner'].strip().lower()
            if values['owner'] not in owners.OWNERS:
                errors.append('allow[%d].owner %r is not one of %s' % (index, entry['owner'], ', '.join(owners.OWNERS)))
                continue
        if 'regex' in values:
            try:
                re.compile(values['regex'])
            except re.error as e:
                errors.append('allow[%d].regex %r does not compile: %s' % (index, values['regex'], e))
                continue
        parsed.append(AllowEntry(index, **values))
    if errors:
        raise MasqError('allow: %s.' % '; '.join(errors))
    return parsed
