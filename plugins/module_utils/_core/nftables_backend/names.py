# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Our nftables table's names: its family, its base chain, the table of a
chain name and how a message names a table.  Apart from ``rules.py`` so
that a run in which nftables only looks (the kernel asked over nfnetlink
whether our table exists: ``backend.Nftables.look``) loads nothing else of
this package: a resync cycle is a fresh python3 that pays for every module.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import validate_chain_name

# The backend's name (``backend.Nftables.name``).
NAME = 'nftables'
FAMILY = 'inet'
CHAIN = 'postrouting'


def table_name(chain):
    """The nftables table of the chain name ``chain``: the same name in lower case."""
    return validate_chain_name(chain).lower()


def table_label(name):
    return 'table %s %s' % (FAMILY, name)
