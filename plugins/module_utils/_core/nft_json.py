# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one reader of ``nft -j list ...`` output (libnftables JSON).

Tables with their chains (base-chain attributes kept: ``type``, ``hook``,
``prio``), rules (their ``expr`` statements as libnftables writes them), named
maps and sets with their elements.  The SNAT audit walks it; an nftables
backend reads its own table with it.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import json

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError


class NftTable:
    """One table: ``chains`` name -> chain object, ``rules`` chain -> [rule
    object], ``maps`` and ``sets`` name -> elements, ``info`` the table object."""

    def __init__(self, family, name):
        self.family = family
        self.name = name
        self.info = {}
        self.chains = collections.OrderedDict()
        self.rules = collections.OrderedDict()
        self.maps = {}
        self.sets = collections.OrderedDict()


def parse_nft(data, what='nft -j list ruleset'):
    """Tables from libnftables JSON (text or already decoded), in the order listed."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as e:
            raise MasqError('%s printed something that is not JSON: %s' % (what, e))
    items = data.get('nftables', []) if isinstance(data, dict) else []
    tables = collections.OrderedDict()

    def table(obj):
        key = (obj.get('family'), obj.get('table', obj.get('name')))
        if key not in tables:
            tables[key] = NftTable(*key)
        return tables[key]

    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            continue
        kind, obj = next(iter(item.items()))
        if not isinstance(obj, dict):
            continue
        if kind == 'table':
            table(obj).info = obj
        elif kind == 'chain':
            t = table(obj)
            t.chains[obj.get('name')] = obj
            t.rules.setdefault(obj.get('name'), [])
        elif kind == 'rule':
            t = table(obj)
            t.rules.setdefault(obj.get('chain'), []).append(obj)
        elif kind == 'map':
            table(obj).maps[obj.get('name')] = obj.get('elem', [])
        elif kind == 'set':
            table(obj).sets[obj.get('name')] = obj
    return tables
