# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Reading /proc on the node: the default ``proc_read`` of a run
(``backend.Node``) and of the SNAT audit, which every backend asks
through the node it is given, never through another backend's tools.

Standard library only: this file runs on managed nodes.
"""


def read_proc(path):
    """The words of a /proc file (its table names), or [] when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().split()
    except (IOError, OSError):
        return []
