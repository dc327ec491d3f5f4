# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Writing a file of our own atomically, outside Ansible.

For the files only ipmasq.agent writes (the resync's state file, the
originals kept under the backup directory and their records).  Files of the
node's own (daemon.json, unit files) are written by the modules through
``AnsibleModule.atomic_move``, which keeps their SELinux context.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def atomic_write(path, data, mode=0o600, uid=None, gid=None):
    """Replace ``path`` with ``data`` (bytes, or text written as UTF-8 with
    surrogateescape): a temporary file beside it, fsync, then rename.  The
    directory is created (0700) when missing.  On failure nothing changes."""
    if not isinstance(data, bytes):
        data = data.encode('utf-8', 'surrogateescape')
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    tmp = os.path.join(directory, '.%s.%d.tmp' % (os.path.basename(path), os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if uid is not None and os.geteuid() == 0:
            os.chown(tmp, uid, gid)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
