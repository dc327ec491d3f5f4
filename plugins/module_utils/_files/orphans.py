# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The temporary files a run killed between staging and renaming left
behind (``.<name>.<12 hex digits>.ipmasq-tmp``, as ``fileio.write_temp``
names them with the prefix ``.<name>.``), and their removal once they are
older than ``ORPHAN_AGE`` seconds: no run keeps a staged file that long, so
a file that old belongs to no live run.

Standard library only: this file runs on managed nodes.
"""

import errno
import os
import re
import stat
import time

# A temporary file of ours (fileio.write_temp with the prefix ".<name>."), and
# how old it must be before a later run removes it as left by a killed run.
TEMP_NAME = re.compile(r'^\.(?P<name>.+)\.[0-9a-f]{12}\.ipmasq-tmp$')
ORPHAN_AGE = 600


def orphans_of(reals):
    """The temporary files a killed run left for the files ``reals``: in a
    file's directory, a name ``.<name>.<12 hex>.ipmasq-tmp`` (as
    ``fileio.write_temp`` makes it) whose ``<name>`` is the file's, a regular
    file older than ``ORPHAN_AGE`` seconds."""
    names = {}
    for real in reals:
        names.setdefault(os.path.dirname(real), set()).add(os.path.basename(real))
    now = time.time()
    found = []
    for directory in sorted(names):
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for entry in sorted(entries):
            m = TEMP_NAME.match(entry)
            if not m or m.group('name') not in names[directory]:
                continue
            real = os.path.join(directory, entry)
            try:
                st = os.lstat(real)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > ORPHAN_AGE:
                found.append(real)
    return found


def remove_orphans(reals, check_mode):
    """Remove what :func:`orphans_of` finds for ``reals`` (in check mode:
    nothing).  ``[(path, None)]`` for each removed (would be), ``(path,
    why)`` for each that could not be; one gone meanwhile is not listed."""
    out = []
    for real in orphans_of(reals):
        if not check_mode:
            try:
                os.unlink(real)
            except OSError as e:
                if e.errno != errno.ENOENT:
                    out.append((real, e.strerror or str(e)))
                continue
        out.append((real, None))
    return out
