# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Where the resync's code lives below ``ip_masq_lib_dir``, and what a run
that changes nothing needs of it: whether the root the controller named is
in place, what an earlier version left, the part's result.

Each version's root is ``<path>/v/<id>/`` (``id``: ``_resync_code.version_id``),
holding ``ansible_collections/ipmasq/agent/plugins/module_utils/_core/``;
1.0 and 1.1 wrote that tree flat, below ``<path>`` itself.  The installer
(``_resync_code``, which reads, hashes and writes the code) builds a root
whole beside it and renames it into place in one step, so a root that is
there is complete.  This file reads no code: the node run imports it alone
where the root it was given is in place (every no-change run with the
resync on), and ``_resync_code`` only where something is to be installed or
swept (each import costs a node run: a module's source is compiled from the
payload on every run).

Standard library only: this file runs on managed nodes.
"""

import os
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._msg import code_msg

PACKAGE = 'ansible_collections.ipmasq.agent.plugins.module_utils._core'
RELATIVE = PACKAGE.replace('.', os.sep)
TOP = 'ansible_collections'
ROOTS = 'v'                     # <path>/v/<id>: one root per version
_ROOT_NAME = re.compile(r'[0-9a-f]{16}\Z')     # a root's name: a version's id


def in_place(path, root):
    """Whether ``root`` is a version's root below ``path`` (``<path>/v/<id>``)
    that is there, so whole (renamed into place only once built: the test
    the installer makes itself).  Reads no code: a run given the root it
    wants (the role's node run: the controller's root, named in the unit)
    knows by one stat that there is nothing to install."""
    return (os.path.dirname(root) == os.path.join(path, ROOTS) and bool(_ROOT_NAME.match(os.path.basename(root)))
            and os.path.isdir(root))


def package_dir(root):
    """The package's directory below a root (or below ``path``: the flat tree of 1.0 and 1.1)."""
    return os.path.join(root, RELATIVE)


def code_dirs(path):
    """The directories of the resync's code below ``path`` (``ip_masq_lib_dir``):
    the versions' roots (``v``) and the flat tree of 1.0 and 1.1."""
    return [os.path.join(path, ROOTS), os.path.join(path, TOP, 'ipmasq', 'agent')]


def roots(path):
    """The installed roots below ``path`` (``v/<id>``; hidden directories, a build under way, left out)."""
    top = os.path.join(path, ROOTS)
    try:
        names = os.listdir(top)
    except OSError:
        return []
    return sorted(os.path.join(top, n) for n in names if not n.startswith('.') and os.path.isdir(os.path.join(top, n)))


def stale(path, root):
    """What a sweep would remove: the other roots and the tree of earlier releases."""
    out = [r for r in roots(path) if r != root]
    legacy = code_dirs(path)[1]
    if os.path.isdir(legacy):
        out.append(legacy)
    return out


def outcome(root, written, removed, check_mode, swept=()):
    """``(result, diff)`` of a run of the resync code's part (the
    ``resync_code`` module, the node run's part): the files written and
    removed (``removed``: the tree itself for ``state: absent``), the
    earlier versions removed (``removed_roots``), and its one-line ``msg``."""
    path = package_dir(root)
    result = {'changed': bool(written or removed or swept), 'path': path, 'written': written, 'removed': removed,
              'removed_roots': list(swept)}
    result['msg'] = code_msg(result, check_mode)
    diff = {'before_header': path, 'after_header': path, 'before': '',
            'after': ''.join('write %s\n' % n for n in written) + ''.join('remove %s\n' % n for n in removed)
            + ''.join('remove earlier version %s\n' % r for r in swept)}
    return result, diff
