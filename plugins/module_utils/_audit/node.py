# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Reading the node, once, and only reading.

Every registered backend (``_core/registry/backends.py``: ``REGISTRY``) reads what
its own readers show (``Backend.audit_read``), in the audit's order
(``audit_rank``), once per family and once for what belongs to no family,
and returns what it found (``backend.AuditFinding``); the judge reads
the findings, not the technology they came from.  The reading is the
core's (``_core/registry/audit_view.py``: ``View``, which the resync's
watcher reads through too): every command goes through its ``read_only``,
which refuses anything but the listings the registered backends declare
(``Backend.audit_listings``); what ran is the result's ``commands``.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._audit.allow import parse_allow
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.judge import analyse
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry.audit_view import View
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.proc import read_proc
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import DEFAULT_CHAIN, validate_chain_name

INCLUDE_NFT = ('auto', 'always', 'never')


def _no_reader():
    """No registered backend's reader is installed: the error names each
    one's tool (``audit_tool``) and the package that installs it."""
    readers = sorted((cls for cls in backends.REGISTRY if cls.audit_rank is not None and cls.audit_tool),
                     key=lambda cls: cls.audit_rank)
    packages = [cls.package('', 0) or cls.name for cls in readers]
    return ('Neither %s was found on the node: nothing to audit. Install %s%s.'
            % (' nor '.join(cls.audit_tool for cls in readers), packages[0],
               ' (or %s)' % ', or '.join(packages[1:]) if packages[1:] else ''))


def audit(run, find, chain=DEFAULT_CHAIN, ipv6=False, include_nft='auto', allow=None, proc_read=None,
          legacy_chains=None):
    """Read the node and judge every SNAT source.  Never changes anything:
    every command goes through ``audit_view.read_only``.  ``legacy_chains(family)``:
    the chains of a legacy nat table no tool read (default: asked of the
    kernel, ``xtables_kernel.chains``)."""
    chain = validate_chain_name(chain)
    if include_nft not in INCLUDE_NFT:
        raise MasqError("include_nft: %r is not one of 'auto', 'always', 'never'." % (include_nft,))
    parse_allow(allow)   # bad input fails before anything runs
    families = (4, 6) if ipv6 else (4,)
    view = View(run, find, proc_read or read_proc, families, include_nft, chain, legacy_chains).collect()
    if not view.tools_found:
        raise MasqError(_no_reader())
    result = analyse(view.findings, chain=chain, ipv6=ipv6, allow=allow, notes=view.notes)
    result['commands'] = view.commands
    return result
