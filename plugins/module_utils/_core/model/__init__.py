# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""model/: the policy (data only) and its validation: every option declared once
(options.py), CIDRs, ranges, intervals, addresses; errors.py: MasqError, the
one exception.
"""
