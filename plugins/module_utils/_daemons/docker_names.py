# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The names Docker gives its rules, tables and bridges: what its editor
(``docker.py``) removes by and its descriptor (``docker_daemon.py``) tells
the SNAT audit.  A file of its own, imported by both, so that the editor
never imports the descriptor that imports it.

Standard library only: this file runs on managed nodes.
"""

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
