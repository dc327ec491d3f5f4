# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""Which ``ip_masq_*`` names the ip_masq role knows, and what a path variable
may be: two of the role's checks on the controller, as pure functions that
return ``(variable, text)`` problems (:func:`name_problems`,
:func:`path_problems`); :mod:`_role_args` adds the host and reports them with
the role's other problems.

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
import json
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


def name_problems(names, spec, known, own, own_variable):
    """``[(variable, text)]``: the entries of ``own`` (the variable
    ``own_variable``) that are declared or not ``ip_masq_*`` names, and every
    ``ip_masq_*`` name of ``names`` that neither ``spec`` (the role's) nor
    ``known`` (the playbooks') declare nor ``own`` lists: a misspelling, whose
    default would apply in silence, with the declared name it most likely means."""
    out = []
    declared = set(spec) | set(known)
    wrong = ['"%s" is a variable of the role' % n for n in own if n in declared]
    wrong += ['"%s" does not start with %s (only those names are checked)' % (n, PREFIX)
              for n in own if not n.startswith(PREFIX)]
    if wrong:
        out.append((own_variable, '%s: list only %s* variables of your own.' % ('; '.join(wrong), PREFIX)))
    for name in unknown(names, declared, own):
        meant = closest(name, declared)
        out.append((name, 'not a variable of the ipmasq.agent.ip_masq role%s. If it is one of your own, list it in '
                    '%s.' % (' (did you mean %s?)' % meant if meant else ' nor of its playbooks', own_variable)))
    return out


def path_problems(values, given, spec, skip=()):
    """``[(variable, text)]`` of every path variable of ``spec`` (but those in
    ``skip``) that the typed ``values`` do not hold as absolute paths; the
    others are normalised in ``values`` (a list without repeats). Null (as
    ``given``) is accepted only where it is the spec's default."""
    out = []
    for name in path_variables(spec):
        if name not in values or name in skip:
            continue
        entry, value = spec[name], values[name]
        many = entry.get('type') == 'list'
        if given.get(name) is None:
            if entry.get('default') is not None:
                out.append((name, 'must be %s, got null.' % ('a list of absolute paths ([] for none)' if many
                                                             else 'an absolute path')))
            continue
        paths, wrong = [], []
        for index, path in enumerate(value if many else [value]):
            try:
                if not isinstance(path, str):
                    raise ValueError('%s is not a path' % json.dumps(path, default=str))
                path = normal_path(path)
                if path not in paths:
                    paths.append(path)
            except ValueError as exc:
                wrong.append(('[%d] %s' % (index, exc)) if many else str(exc))
        if wrong:
            out.append((name, '%s.' % '; '.join(wrong)))
        else:
            values[name] = paths if many else paths[0]
    return out
