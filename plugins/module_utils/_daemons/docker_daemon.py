# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Docker, as the registry (``registry.py``) knows it: :data:`DAEMON`, and
:data:`AUDIT`, how the SNAT audit (``_audit/owners.py``) tells its rules
by the names they carry (``docker_names.py``, which its editor,
``docker.py``, removes them by).  The editor is imported only when a run
needs it: the audit and the controller read this file without it.

Standard library only: this file runs on managed nodes.
"""

import functools

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import Daemon
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker_names import (
    DEFAULT_BRIDGE,
    DEFAULT_SUBNET,
    DOCKER_NFT_TABLE,
    NETWORK_BRIDGE,
    NETWORK_ID_DIGITS,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.owner import Owner

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
    # Start-up cost: the editor (and the backends it removes rules with) loads only when a run edits Docker.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker import DOCKER_OPTIONS, docker_sync  # pylint: disable=import-outside-toplevel
    return DOCKER_OPTIONS, docker_sync


def restarted():
    """Docker's clean-up as after the role's restart (``Daemon.restarted``)."""
    # Start-up cost, as editor(): only the after mode of the explanation needs it.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker import docker_sync  # pylint: disable=import-outside-toplevel
    return functools.partial(docker_sync, restarted=True)


DAEMON = Daemon(
    'docker',
    editor=editor,
    restarted=restarted,
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
