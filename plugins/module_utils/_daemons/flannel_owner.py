# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""flannel as a writer of nat rules: the names its rules carry, which the
clean-up (``flannel.py``) removes by, and :data:`AUDIT`, how the SNAT audit
(``_audit/owners.py``) tells them.  A file of its own so that the audit
reads these facts without importing the daemon-file editing.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.owner import Owner

FLANNEL_CHAIN = 'FLANNEL-POSTRTG'
FLANNEL_COMMENT = 'flanneld masq'
# flanneld's nftables mode: its tables and the chain --ip-masq adds to them.
FLANNEL_NFT_TABLES = (('ip', 'flannel-ipv4'), ('ip6', 'flannel-ipv6'))
FLANNEL_NFT_CHAIN = 'postrtg'

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
