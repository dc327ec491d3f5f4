# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Installed by resync_code, the package is a symlink to a version directory
# (_resync_code.py): a resync reads the rest of its modules from the version
# it started with, even when the link is switched while it runs.
import os as _os

if _os.path.islink(__path__[0]):
    __path__[0] = _os.path.realpath(__path__[0])
