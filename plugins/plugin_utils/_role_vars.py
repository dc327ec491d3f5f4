# Copyright: contributors to the ipmasq.agent collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""Which ``ip_masq_*`` names the ip_masq role knows, and what a path variable
may be: the pure rules behind two of the role's checks on the controller
(:mod:`_role_args` words them for the role, naming the variable and the host).

- Names: a host's ``ip_masq_*`` variable that neither the role's argument
  spec nor the collection's playbooks declare, nor the user lists as their
  own (``ip_masq_user_vars``), is a misspelling until told otherwise
  (:func:`unknown`); :func:`closest` names the declared one it most likely
  meant. Only top-level names count (``hostvars`` and the like are not
  looked into); ``__ip_masq_*`` names are the role's internal ones.
- Paths: every variable the spec types ``path`` (or ``list`` of ``path``)
  is an absolute path, normalised as the kernel reads it
  (``/etc//cni/./net.d/`` is ``/etc/cni/net.d``), with no ``..``
  component (:func:`normal_path`).
"""

from __future__ import annotations

import difflib
import posixpath

PREFIX = 'ip_masq_'
# How alike a misspelling and the name it stands for are (difflib's ratio of
# the parts after the prefix, which every name shares).
_CUTOFF = 0.6


def path_variables(spec):
    """The names of the spec's path variables (``type: path``, or a list of ``elements: path``), sorted."""
    return sorted(name for name, entry in spec.items()
                  if entry.get('type') == 'path' or (entry.get('type') == 'list' and entry.get('elements') == 'path'))


def normal_path(path):
    """``path`` normalised; ValueError saying why it is refused (the value shown as JSON shows it).

    Refused: anything that does not start with ``/`` (the node would resolve it
    against whatever directory its module runs in), a ``..`` component (after
    a symbolic link, ``..`` is not the directory before it, so the lexical
    normalisation could name another file than the node would use), a NUL
    character. ``/`` stays ``/``; ``//x`` is ``/x``."""
    shown = '"%s"' % path.replace('\\', '\\\\').replace('"', '\\"').replace('\x00', '\\u0000')
    if not path.startswith('/'):
        raise ValueError('%s is not an absolute path (one that starts with /)' % shown)
    if '\x00' in path:
        raise ValueError('%s holds a NUL character' % shown)
    if '..' in path.split('/'):
        raise ValueError('%s has a .. component: give the path without it (after a symbolic link, .. is not the '
                         'directory before it)' % shown)
    normal = posixpath.normpath(path)
    return '/' + normal.lstrip('/')


def closest(name, known):
    """The name in ``known`` that ``name`` most likely misspells, or None."""
    tail = name[len(PREFIX):] if name.startswith(PREFIX) else name
    tails = dict((k[len(PREFIX):], k) for k in known if k.startswith(PREFIX))
    found = difflib.get_close_matches(tail, list(tails), n=1, cutoff=_CUTOFF)
    return tails[found[0]] if found else None


def unknown(names, known, own=()):
    """The user variables among ``names`` (``ip_masq_*``, not the internal
    ``__ip_masq_*``) that are neither in ``known`` nor in ``own``, sorted."""
    return sorted(set(n for n in names if isinstance(n, str) and n.startswith(PREFIX)
                      and n not in known and n not in own))
