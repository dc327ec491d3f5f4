# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The names flannel gives its rules, chains and tables: what its editor
(``flannel.py``) removes by and its descriptor (``flannel_daemon.py``)
tells the SNAT audit.  A file of its own, imported by both, so that the
editor never imports the descriptor that imports it.

Standard library only: this file runs on managed nodes.
"""

FLANNEL_CHAIN = 'FLANNEL-POSTRTG'
FLANNEL_COMMENT = 'flanneld masq'
# flanneld's nftables mode: its tables and the chain --ip-masq adds to them.
FLANNEL_NFT_TABLES = (('ip', 'flannel-ipv4'), ('ip6', 'flannel-ipv6'))
FLANNEL_NFT_CHAIN = 'postrtg'
