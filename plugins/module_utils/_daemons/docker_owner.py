# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Docker as a writer of nat rules: the names its rules carry, which the
clean-up (``docker.py``) removes by, and :data:`AUDIT`, how the SNAT audit
(``_audit/owners.py``) tells them.  A file of its own so that the audit
reads these facts without importing the daemon-file editing.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.owner import Owner

# Docker's nftables firewall backend (libnetwork/drivers/bridge/internal/nftabler):
# one table per family; per bridge network, its masquerade rule in chain
# nat-postrouting-out__<bridge>, reached from the nat-POSTROUTING base chain
# through the verdict map nat-postrouting-out-jumps (keyed by iifname).
DOCKER_NFT_TABLE = 'docker-bridges'
DOCKER_NFT_OUT_CHAIN = 'nat-postrouting-out__'
DOCKER_NFT_COMMENT = 'MASQUERADE'
# The default bridge and its default subnet; a user-defined network's bridge
# is br-<the first 12 hex digits of its id>.
DEFAULT_BRIDGE = 'docker0'
DEFAULT_SUBNET = '172.17.0.0/16'
NETWORK_BRIDGE = 'br-%s'
NETWORK_ID_DIGITS = 12

# Docker's rules, as the SNAT audit tells them (_audit/owners.py).
AUDIT = Owner(
    'docker',
    chains=('DOCKER',),             # DOCKER, DOCKER-USER, DOCKER-ISOLATION-STAGE-1, ...
    tables=('docker',),             # DOCKER_NFT_TABLE
    ifaces=(r'^(%s|docker_gwbridge|%s)$' % (DEFAULT_BRIDGE, NETWORK_BRIDGE % ('[0-9a-f]{%d}' % NETWORK_ID_DIGITS)),),
    subnets=(DEFAULT_SUBNET,),
    hint=('Docker masquerades this bridge network: set "ip-masq": false in /etc/docker/daemon.json and restart '
          'Docker (default bridge); a user-defined network needs com.docker.network.bridge.enable_ip_masquerade=false '
          '(recreate the network)'),
)
