# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""flannel, as the registry (``registry.py``) knows it: :data:`DAEMON`, and
:data:`AUDIT`, how the SNAT audit (``_audit/owners.py``) tells its rules
by the names they carry (``flannel_names.py``, which its editor,
``flannel.py``, removes them by).  The editor is imported only when a run
needs it: the audit and the controller read this file without it.

Standard library only: this file runs on managed nodes.
"""

import functools

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import Daemon
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.flannel_names import (
    FLANNEL_CHAIN,
    FLANNEL_NFT_CHAIN,
    FLANNEL_NFT_TABLES,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.owner import Owner

# flannel's rules, as the SNAT audit tells them (_audit/owners.py).
AUDIT = Owner(
    'flannel',
    chains=('FLANNEL',),            # FLANNEL_CHAIN, and FLANNEL-FWD in the filter table
    tables=('flannel',),            # FLANNEL_NFT_TABLES
    comments=('flanneld',),         # FLANNEL_COMMENT, and flanneld's other comments
    ifaces=('^flannel',),           # flannel.1, flannel-v6.1, flannel-wg
    hint=('flanneld runs with --ip-masq: remove the flag (FLANNEL_OPTIONS, the unit, or FLANNEL_IPMASQ) and delete '
          'the stale %s chain, or in nftables mode the %s chain of the %s tables: switching the flag off does not '
          'remove them (ipmasq.agent.flannel_ip_masq does all of it)'
          % (FLANNEL_CHAIN, FLANNEL_NFT_CHAIN, '/'.join(name for _family, name in FLANNEL_NFT_TABLES))),
)


def editor():
    """flannel's editor: ``(options, sync)``."""
    # Start-up cost: the editor (and the backends it removes rules with) loads only when a run edits flannel.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.flannel import FLANNEL_OPTIONS, flannel_sync  # pylint: disable=import-outside-toplevel
    return FLANNEL_OPTIONS, flannel_sync


def restarted():
    """flannel's clean-up as after the role's restart (``Daemon.restarted``)."""
    # Start-up cost, as editor(): only the after mode of the explanation needs it.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.flannel import flannel_sync  # pylint: disable=import-outside-toplevel
    return functools.partial(flannel_sync, restarted=True)


DAEMON = Daemon(
    'flannel',
    editor=editor,
    restarted=restarted,
    service='flanneld.service',
    owner=AUDIT,
    module='flannel_ip_masq',
    description=('V(auto) removes flanneld\'s --ip-masq when flanneld runs under systemd; V(manage) the same, and '
                 'fails where flanneld is not installed; V(report) only reports what it would change; V(skip) leaves '
                 'flannel alone.'),
    doc=('``--ip-masq`` in flanneld\'s options (unit, drop-ins, environment files, ``FLANNELD_IP_MASQ``), '
         '``ipmasq=true`` in ``mk-docker-opts.sh``; then its ``%s`` chain, or in nftables mode the ``%s`` chain '
         'of its tables' % (FLANNEL_CHAIN, FLANNEL_NFT_CHAIN)),
    # Restarting flanneld runs mk-docker-opts.sh, which rewrites Docker's options: flannel comes before Docker.
    read={'remove_stale_rules': True},
    edit={'remove_stale_rules': False},
    cleanup={'remove_stale_rules': True},
)
