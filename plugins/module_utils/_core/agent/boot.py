# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The resync's start: the core's code from one compiled file.

Each resync cycle is a fresh python3 that imports some forty modules of the
core; found and read one by one, each costs a dozen system calls (the
namespace packages above ``_core`` are looked for on every path entry, each
folder is listed, each module's ``.py`` and ``.pyc`` looked up and opened).
The installer (``_resync_code``) copies this file to the top of a version's
root as ``_ipmasq_resync.py`` and runs it there, with the node's own python
(the one the unit runs), as :func:`build_argv` says: it compiles every
module of the root's core (as ``-OO`` would: no docstrings; without the
columns of each instruction, which only a traceback's carets use) into one
file beside it
(``BUNDLE``: the interpreter's magic number, the length of the index (4
bytes, little-endian), the index, a marshal of ``{module name: (start, end,
is a package, file below the root)}``, then each module's marshalled code
from ``start`` to ``end`` after it; a module's code is unmarshalled when it
is imported, so what a cycle does not import costs it nothing).  The unit
runs :func:`main` (``from _ipmasq_resync import main``, the root on its
PYTHONPATH): that file opened once and its index read, and a finder first on
``sys.meta_path`` hands each module its compiled code, read from the open
file (``os.pread``) when the module is imported, with ``__file__`` the file
it was compiled from (``resync.hold_root`` locks it).  A cycle reads only the
modules it imports, not the whole file (a third of it is what only a
repair, the module, the audit or the watcher runs), and the cyclic garbage
collector is off while they load: it would walk the objects each module
makes again and again, and a module's objects are never garbage.  Once
loaded, they are frozen out of its reach (``gc.freeze``), so that the
collections of the cycle itself (a thousand CIDRs parsed) do not walk
them either.

Where the file is missing, unreadable or of another interpreter (the node's
python3 was upgraded since), the finder is not installed and the modules are
imported from the root's folders as before; a module the file does not hold
is looked for there too.  Standard library only; this file runs on nodes.
"""

import gc
import marshal
import os
import sys

BUNDLE = '_ipmasq_resync.bin'   # beside this file, at the top of a version's root
PACKAGE = 'ansible_collections.ipmasq.agent.plugins.module_utils._core'
ENTRY = PACKAGE + '.agent.resync'
# Compiled as python -OO would: no docstrings to unmarshal in every cycle (the
# core reads none, holds no assert; tests/unit/.../test_resync_code.py holds it).
OPTIMIZE = 2
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)


def _magic():
    importer = sys.modules.get('_frozen_importlib_external')
    if importer is None:    # not CPython's import system (never on CPython): ask importlib
        import importlib.util  # pylint: disable=import-outside-toplevel
        return importlib.util.MAGIC_NUMBER
    return importer.MAGIC_NUMBER


class _Loader:
    """Runs a module's code from the file (``create_module``: the default module)."""

    def __init__(self, index, fd, at):
        self.index, self.fd, self.at = index, fd, at

    def create_module(self, spec):  # pylint: disable=unused-argument
        return None

    def exec_module(self, module):
        entry = self.index[module.__name__]
        code = os.pread(self.fd, entry[1] - entry[0], self.at + entry[0])
        module.__file__ = module.__spec__.origin     # set here: see _Finder.find_spec
        exec(marshal.loads(code), module.__dict__)  # pylint: disable=exec-used


class _Finder:
    """The modules of the index, each with the file below ``root`` it was compiled from."""

    def __init__(self, index, root, fd, at):
        self.index, self.root, self.loader = index, root, _Loader(index, fd, at)
        self.spec = sys.modules['_frozen_importlib'].ModuleSpec if '_frozen_importlib' in sys.modules else None

    def find_spec(self, name, path=None, target=None):  # pylint: disable=unused-argument
        entry = self.index.get(name)
        if entry is None or self.spec is None:
            return None
        origin = os.path.join(self.root, entry[3])
        # Not ``has_location``: the import system would then work out, for every module, the
        # ``__cached__`` of a .pyc the module is not read from; the loader sets ``__file__``.
        spec = self.spec(name, self.loader, origin=origin, is_package=entry[2])
        if entry[2]:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec

    def invalidate_caches(self):
        pass


def load(root):
    """Put the finder of the file ``BUNDLE`` in ``root`` first on
    ``sys.meta_path``, the file held open for it (not inherited by the
    commands a cycle runs); False (and nothing done) where the file is
    missing, unreadable, not whole or not of this interpreter."""
    magic = _magic()
    start = len(magic) + 4
    fd = None
    try:
        fd = os.open(os.path.join(root, BUNDLE), os.O_RDONLY)
        head = os.pread(fd, start, 0)
        if len(head) != start or head[:len(magic)] != magic:
            raise ValueError('not of this interpreter')
        size, whole = int.from_bytes(head[len(magic):], 'little'), os.fstat(fd).st_size
        if start + size > whole:
            raise ValueError('not whole')
        index = marshal.loads(os.pread(fd, size, start))
        if not isinstance(index, dict):
            raise ValueError('not an index')
        if start + size + max(entry[1] for entry in index.values()) != whole:
            raise ValueError('not whole')
    except (OSError, ValueError, EOFError, TypeError, IndexError):
        if fd is not None:
            os.close(fd)
        return False
    sys.meta_path.insert(0, _Finder(index, root, fd, start + size))
    return True


def main():
    """The resync's ``main()``, its modules from the file where it can be read."""
    load(os.path.dirname(os.path.abspath(__file__)))
    gc.disable()            # while the modules load (see above)
    try:
        __import__(ENTRY)
    finally:
        gc.freeze()         # their objects: no later collection (the cycle's, the watcher's) walks them again
        gc.enable()
    return sys.modules[ENTRY].main()


def table(root, named_root=None):
    """``{module name: (code, is a package, file)}`` of every module of the
    core below ``root`` and the packages above it (``file`` relative to the
    root; each code compiled, without docstrings, with its file's path
    below ``named_root``, where the root will be, for tracebacks, and
    marshalled)."""
    named_root = named_root or root
    parts = PACKAGE.split('.')
    out = {}
    for depth in range(1, len(parts)):     # ansible_collections ... module_utils: empty packages
        relative = os.path.join(*(parts[:depth] + ['__init__.py']))
        code = compile('', os.path.join(named_root, relative), 'exec', dont_inherit=True, optimize=OPTIMIZE)
        out['.'.join(parts[:depth])] = (marshal.dumps(code), True, relative)
    top = os.path.join(root, *parts)
    for base, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for name in sorted(n for n in names if n.endswith('.py')):
            relative = os.path.relpath(os.path.join(base, name), root)
            module = relative[:-len('.py')].split(os.sep)
            is_package = module[-1] == '__init__'
            with open(os.path.join(root, relative), 'rb') as handle:
                source = handle.read()
            code = compile(source, os.path.join(named_root, relative), 'exec', dont_inherit=True, optimize=OPTIMIZE)
            out['.'.join(module[:-1] if is_package else module)] = (marshal.dumps(code), is_package, relative)
    return out


def build_argv(python, start, building, root):
    """How the installer runs this file (``start``, copied into the root
    ``building`` that will be ``root``) with ``python`` to write ``BUNDLE``:
    ``-X no_debug_ranges`` leaves the columns out of the code (a third less
    to unmarshal on Python 3.11 and later; earlier ones ignore it)."""
    return [python, '-I', '-X', 'no_debug_ranges', start, building, root]


def build(root, named_root=None):
    """Write the file ``BUNDLE`` in ``root`` (a new file, on disk before it returns)."""
    modules = table(root, named_root)
    index, codes, at = {}, [], 0
    for name in sorted(modules):
        code, is_package, relative = modules[name]
        index[name] = (at, at + len(code), is_package, relative)
        codes.append(code)
        at += len(code)
    head = marshal.dumps(index)
    data = _magic() + len(head).to_bytes(4, 'little') + head + b''.join(codes)
    write_new(os.path.join(root, BUNDLE), data)


def write_new(path, data):
    """``data`` in the new file ``path`` (0644; never through a link, never
    over a file that is there), on disk before it returns.  The installer
    (``_resync_code``) writes the root's files with it too: this file runs
    alone on the node, so the writer lives here."""
    fd = os.open(path, _WRITE_FLAGS, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)


if __name__ == '__main__':
    # The installer's step (build_argv).
    build(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
