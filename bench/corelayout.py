# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The core's modules by their names in this tree, also from a ``--baseline``
of the other layout: the core in folders (scripts/move_core.py) or the flat
``_core`` before it.  The names the bench uses are this tree's; an older
tree's name for the same module comes from move_core's table (its one home).
"""
import importlib
import importlib.util
import os

PREFIX = 'ansible_collections.ipmasq.agent.plugins.module_utils.'
_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'scripts', 'move_core.py')


def _moves():
    spec = importlib.util.spec_from_file_location('move_core', _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {module.dotted(new): module.dotted(old) for old, new in module.MOVES.items() if old != new}


def other_names(name):
    """``name`` ('_core.model.policy') and what the other layout calls it."""
    flat = _moves()
    folders = {old: new for new, old in flat.items()}
    return [name] + [n for n in (flat.get(name), folders.get(name)) if n]


def core_module(name):
    """The module ``name`` ('_core.model.policy', below module_utils) of the
    tree on PYTHONPATH, in either layout."""
    error = None
    for candidate in other_names(name):
        try:
            return importlib.import_module(PREFIX + candidate)
        except ImportError as exc:
            error = error or exc
    raise error


def module_in(utils, name):
    """The dotted name (full) of module ``name`` in the tree whose module_utils
    folder is ``utils``, in either layout."""
    for candidate in other_names(name):
        if os.path.exists(os.path.join(utils, *candidate.split('.')) + '.py'):
            return PREFIX + candidate
    return PREFIX + name
