# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Installing the node-side core (``_core``, the resync's code) on a node.

The files come from wherever the running code was imported from: the
``resync_code`` module's own payload on a node (so the copy is always the
code this very collection version runs, and no list of files is kept
anywhere), or the source tree (benchmarks, tests).  Only files that differ
are written; files of an older version that are gone from the package are
removed; the result is byte-compiled for the Python the service runs.

Standard library only: this file runs on managed nodes.
"""

import os
import pkgutil
import shutil

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.fileio import atomic_write

PACKAGE = 'ansible_collections.ipmasq.agent.plugins.module_utils._core'
RELATIVE = PACKAGE.replace('.', os.sep)
TOP = 'ansible_collections'


def package_sources():
    """``{file name: bytes}`` of every module of the core package, read
    through the package's own loader (a zip or a directory)."""
    import importlib  # pylint: disable=import-outside-toplevel

    package = importlib.import_module(PACKAGE)
    names = ['__init__'] + sorted(info.name for info in pkgutil.iter_modules(package.__path__)
                                  if not info.ispkg)
    sources = {}
    for name in names:
        data = pkgutil.get_data(PACKAGE, name + '.py')
        if data is None:
            raise MasqError('cannot read %s.%s from the collection: the code to install is incomplete.'
                            % (PACKAGE, name))
        sources[name + '.py'] = data
    return sources


def package_dir(path):
    return os.path.join(path, RELATIVE)


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def plan(path, sources):
    """``(write, remove)``: the file names to write and the stale ones to remove."""
    target = package_dir(path)
    write = sorted(name for name, data in sources.items() if _read(os.path.join(target, name)) != data)
    present = os.listdir(target) if os.path.isdir(target) else []
    remove = sorted(n for n in present if n.endswith('.py') and n not in sources)
    return write, remove


def install(path, sources, run, python, check_mode=False):
    """Bring ``<path>/ansible_collections/.../_core`` to ``sources`` and
    byte-compile it with ``python``.  Returns ``(written, removed)``."""
    target = package_dir(path)
    write, remove = plan(path, sources)
    if check_mode or not (write or remove):
        return write, remove
    try:
        for name in write:
            atomic_write(os.path.join(target, name), sources[name], 0o644)
        for name in remove:
            os.unlink(os.path.join(target, name))
        cache = os.path.join(target, '__pycache__')
        if remove and os.path.isdir(cache):
            shutil.rmtree(cache)
    except (IOError, OSError) as e:
        raise MasqError('cannot install the resync code in %s: %s.' % (target, e.strerror or e))
    for directory in _dirs(path):
        os.chmod(directory, 0o755)
    rc, out, err = run([python, '-m', 'compileall', '-q', target])
    if rc != 0:
        raise MasqError('%s could not byte-compile %s (rc=%d): %s' % (python, target, rc, (err or out).strip()),
                        rc=rc, stdout=out, stderr=err)
    return write, remove


def _dirs(path):
    """The directories from ``path`` down to the package directory."""
    out = [path]
    current = path
    for part in RELATIVE.split(os.sep):
        current = os.path.join(current, part)
        out.append(current)
    return out


def uninstall(path, check_mode=False):
    """Remove our tree below ``path``, and ``path`` and its parents of ours
    when they are left empty.  Returns whether anything was there."""
    top = os.path.join(path, TOP, 'ipmasq', 'agent')
    present = os.path.isdir(top)
    if check_mode:
        return present
    if present:
        shutil.rmtree(top)
    for directory in (os.path.join(path, TOP, 'ipmasq'), os.path.join(path, TOP), path):
        try:
            os.rmdir(directory)
        except OSError:
            break         # not empty (ip_masq_lib_dir may be shared) or not there
    return present
