# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Docker, as the registry (``registry.py``) knows it: :data:`DAEMON`.
The names its rules carry, which its editor (``docker.py``) removes by, and
:data:`AUDIT`, how the SNAT audit (``_audit/owners.py``) tells them.  The
editor is imported only when a run needs it: the audit and the controller
read this file without it.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import Daemon
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


def editor():
    """Docker's editor: ``(options, sync)``."""
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker import DOCKER_OPTIONS, docker_sync  # pylint: disable=import-outside-toplevel
    return DOCKER_OPTIONS, docker_sync


DAEMON = Daemon(
    'docker',
    editor=editor,
    service='docker.service',
    owner=AUDIT,
    module='docker_ip_masq',
    description=('V(auto) switches Docker\'s default-bridge masquerading off when Docker is installed; V(manage) the '
                 'same, and fails where Docker is not installed; V(report) only reports what it would change; V(skip) '
                 'leaves Docker alone.'),
    doc=('``"ip-masq": false`` in ``daemon.json`` (or ``--ip-masq=false`` where the flag is on the command line); '
         'then its stale default-bridge ``MASQUERADE`` rule (iptables, or its ``%s`` nftables tables); user-defined '
         'networks that still masquerade are reported' % DOCKER_NFT_TABLE),
    variables={'ip_masq_docker_daemon_json': ('daemon_json', dict(
        description='Docker\'s daemon.json.', type='path', default='/etc/docker/daemon.json'))},
    read={'remove_stale_rules': True, 'report_networks': True},
    cleanup={'remove_stale_rules': True, 'report_networks': True},
)
