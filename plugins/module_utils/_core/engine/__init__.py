# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""engine/: what every backend is built on: the Backend interface (backend.py),
drift, the msg's words, the read -> plan -> write loop (sync.py), the steps
with an undo (transaction.py), and what every backend's audit reader shares: a
rule's conditions (conds.py), the walk from the hook (walk.py).
"""
