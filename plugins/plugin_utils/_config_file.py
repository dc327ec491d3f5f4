# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""The agent config file the ip_masq role writes, from the typed, validated
values (never from raw variables): the upstream schema's keys, then the
extensions that are set, each key and its order from the options table
(``module_utils/_core/model/options.py``).  The node's resync reads it back with
``config.parse_config``: tests/unit/test_config_file.py holds that what is
written is what the controller checked."""

from __future__ import annotations

import json

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import OPTIONS
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import LIST_FACTS

HEADER = "# The Kubernetes ip-masq-agent config schema: the same file the upstream agent reads.\n"
EXTENSIONS_HEADER = "# Extensions of ipmasq.agent: the upstream agent ignores these keys.\n"


def _scalar(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return str(value)


def _list(key, items, quoted):
    if not items:
        return '%s: []\n' % key
    return '%s:\n' % key + ''.join('  - %s\n' % (json.dumps(item) if quoted else item) for item in items)


def config_text(values, facts, managed=None):
    """The config file for the typed role variables ``values`` and the
    normalised lists ``facts`` (``role_args``' result)."""
    out = ['# %s\n' % managed if managed else '', HEADER]
    extensions = []
    for option in OPTIONS:
        if not option.key:
            continue
        value = facts[LIST_FACTS[option.name]] if option.name in LIST_FACTS else values[option.role]
        if option.extension:
            if value != option.default:
                extensions.append((option, value))
            continue
        if option.name == 'nonmasquerade_cidrs' and facts['__ip_masq_default_list']:
            out.append('# nonMasqueradeCIDRs: not set: masqueradeCIDRs below lists the only destinations masqueraded\n'
                       if facts['__ip_masq_masquerade'] else
                       '# nonMasqueradeCIDRs: not set, so the default list applies (ip_masq_rule_format upstream)\n')
        elif option.type == 'list':
            out.append(_list(option.key, value, quoted=False))
        else:
            out.append('%s: %s\n' % (option.key, _scalar(value)))
    if extensions:
        out.append(EXTENSIONS_HEADER)
    for option, value in extensions:
        if option.type == 'list':
            out.append(_list(option.key, value, quoted=option.name == 'out_interfaces'))
        else:
            out.append('%s: %s\n' % (option.key, _scalar(value)))
    return ''.join(out)
