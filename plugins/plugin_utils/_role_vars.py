# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to the ipmasq.agent collection: not a public API, it may change without notice.
"""A host's ip_masq role variables as given, read on the controller
(:func:`read`): the role's files that declare them (its argument spec and
defaults, the collection's playbooks' entry point), their types as
ansible-core's validator converts them on the spec (what
``validate_argument_spec`` does), which ``ip_masq_*`` names the role knows,
and what a path variable may be. :func:`read` returns the typed values and
the problems found so far, one line each naming the variable and the host;
``_role_args.role_args`` checks the rest and reports them all at once. The
names and paths are pure functions that return ``(variable, text)``
problems (:func:`name_problems`, :func:`path_problems`).

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
import os
import posixpath
import re
from collections import namedtuple
from collections.abc import Iterable, Mapping

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.validation import check_type_dict, check_type_list

PREFIX = 'ip_masq_'
# How alike a misspelling and the name it stands for are (difflib's ratio of
# the parts after the prefix, which every name shares).
_CUTOFF = 0.6
# The role variable that lists the user's own ip_masq_* variables (not refused as misspellings).
USER_VARS = 'ip_masq_user_vars'


# The role's folder in this collection (the action may run outside the role).
ROLE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles', 'ip_masq')
ENTRY_POINT = 'ip_masq'
# The entry point of the role's argument spec that declares the variables of
# the collection's playbooks (site.yml, audit.yml): no role variables, but no
# misspellings either.
PLAYS_ENTRY_POINT = 'playbooks'
_READ = {}


def _role_file(role_path, *parts):
    """A YAML file of the role, read once per process."""
    path = os.path.join(role_path, *parts)
    if path not in _READ:
        with open(path, 'rb') as handle:
            _READ[path] = yaml.load(handle, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
    return _READ[path]


def role_spec(role_path=ROLE_PATH):
    """The options of the role's argument spec (meta/argument_specs.yml,
    entry point ip_masq), without their documentation."""
    options = _role_file(role_path, 'meta', 'argument_specs.yml')['argument_specs'][ENTRY_POINT]['options']
    return dict((name, dict((key, value) for key, value in entry.items()
                            if key in ('type', 'elements', 'default', 'choices')))
                for name, entry in options.items())


def play_variables(role_path=ROLE_PATH):
    """The names of the variables the collection's playbooks read (the
    argument spec's entry point ``playbooks``)."""
    return tuple(_role_file(role_path, 'meta', 'argument_specs.yml')['argument_specs'][PLAYS_ENTRY_POINT]['options'])


def role_defaults(role_path=ROLE_PATH):
    """The role's defaults/main.yml (for the action run outside the role)."""
    return _role_file(role_path, 'defaults', 'main.yml')


# How the one-line type messages name what a variable must be.
_WANT = {'str': 'a string', 'path': 'a path (a string)', 'bool': 'true or false', 'int': 'a whole number',
         'list': 'a list', 'dict': 'a mapping', 'raw': 'a value'}
_NAMED = (re.compile(r"^argument '([^']+)'"), re.compile(r"option '([^']+)'"), re.compile(r'^value of (\S+) must be'))


class _Problems(list):
    """The problems of one host, one line each, and the variables they name."""

    def __init__(self, host):
        super().__init__()
        self.host = host
        self.bad = set()

    def add(self, variable, text, where=''):
        """One line: ``variable`` (and ``where`` in it: ``[1].dst``) of the host: ``text``."""
        self.bad.add(variable)
        self.append('%s%s of %s: %s' % (variable, where, self.host, text) if variable else text)

    def copy(self):
        out = _Problems(self.host)
        out.extend(self)
        out.bad = set(self.bad)
        return out


def _got(value):
    if isinstance(value, Mapping):
        return 'a mapping'
    if isinstance(value, str):
        return 'a string'
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, (int, float)):
        return 'a number'
    if isinstance(value, (list, tuple)):
        return 'a list'
    return 'null' if value is None else 'a value'


def _json(value):
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _not_mappings(value):
    """``[(index, element)]`` of the elements of ``value`` (a list, or a string ansible-core splits into one)
    that ansible-core cannot convert to a mapping; None when ``value`` is no list at all."""
    try:
        items = check_type_list(value)
    except TypeError:
        return None
    bad = []
    for index, item in enumerate(items):
        try:
            check_type_dict(item)
        except (TypeError, ValueError):
            bad.append((index, item))
    return bad


def _typed(values, spec, problems):
    """``values`` converted by ansible-core's ArgumentSpecValidator on the
    role's spec (what validate_argument_spec does); a value it refuses is
    one line in ``problems`` and stays as given."""
    given = dict((name, value) for name, value in values.items() if name in spec)
    checked = ArgumentSpecValidator(spec).validate(given, validate_role_argument_spec=True)
    typed = dict(values)
    typed.update(checked.validated_parameters)
    for error in checked.errors:
        text = getattr(error, 'error_message', None) or str(error)
        name = next((m.group(1) for m in (r.search(text) for r in _NAMED) if m), None)
        if name in spec:
            entry = spec[name]
            want = _WANT.get(entry.get('type', 'str'), entry.get('type'))
            if entry.get('elements') in ('str', 'path'):
                want += ' of strings'
            if entry.get('elements') == 'dict':
                want += ' of mappings'
                # Each element that is none, named by its index.
                elements = _not_mappings(values.get(name)) if name not in problems.bad else None
                if elements:
                    for index, item in elements:
                        problems.add(name, 'must be a mapping, got %s: %s.' % (_got(item), _json(item)),
                                     where='[%d]' % index)
                    continue
            if entry.get('choices') and text.startswith('value of'):
                want = 'one of %s' % ', '.join(str(c) for c in entry['choices'])
            problems.add(name, 'must be %s, got %s: %s.' % (want, _got(values.get(name)), _json(values.get(name))))
        else:
            problems.add(None, 'ip_masq role variables of %s: %s' % (problems.host, text))
    return typed


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


# What :func:`read` made of a host's role variables: the typed values, and
# the problems found so far (a :class:`_Problems`: the host, one line each,
# the variables refused), which ``_role_args.role_args`` adds to and reports.
Given = namedtuple('Given', 'typed problems')


def read(values: Mapping[str, object], host: str, spec: Mapping[str, dict] | None = None,
         names: Iterable[str] = (), known: Iterable[str] | None = None) -> Given:
    """Read the ip_masq role's variables of ``host`` on the controller:
    ``values``: the ``ip_masq_*`` variables (the role's defaults under the
    user's), templated, in any form a user gives them; ``spec``: the role's
    argument spec (meta/argument_specs.yml, entry point ``ip_masq``'s
    ``options``; this collection's role by default); ``names``: every
    variable name the host has (the action's task_vars' keys: inventory,
    group_vars, host_vars, play vars, ``-e``); ``known``: the variables of
    the collection's playbooks (entry point ``playbooks`` of this
    collection's role by default). The values are typed by ansible-core's
    validator on ``spec``; an ``ip_masq_*`` name in ``values`` or ``names``
    that none of these declare, and a path variable that is no absolute
    path, are problems; the paths are normalised."""
    problems = _Problems(host)
    spec = role_spec() if spec is None else spec
    typed = _typed(values, spec, problems)
    own = typed.get(USER_VARS) or [] if USER_VARS not in problems.bad else []
    for variable, text in name_problems(set(typed) | set(names), spec,
                                        play_variables() if known is None else known, own, USER_VARS):
        problems.add(variable, text)
    for variable, text in path_problems(typed, values, spec, problems.bad):
        problems.add(variable, text)
    return Given(typed, problems)
