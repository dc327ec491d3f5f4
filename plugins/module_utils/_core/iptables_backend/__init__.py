# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""iptables_backend/: the iptables backends (on PATH, -legacy, -nft: backend.py,
flavours.py): the policy's spelling, the chain layout, iptables-save reader,
tools, plan and verified write, the kernel's xtables, the audit's reader.
"""
