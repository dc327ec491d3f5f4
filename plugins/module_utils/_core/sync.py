# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one read -> plan -> write loop of every writer of ours.

``locked(read, plan)`` takes the writers' lock, reads everything the plan
needs, plans from that reading and writes the plan, and only then lets the
next writer in: two writers (the role's run and the resync timer, two plays,
an operator and a timer) can never both plan from the same reading.  Check
mode reads and plans without the lock and writes nothing.

``sync(policy, backend)`` is that loop for the SNAT policy: what the
``masq_chain`` module and the node-side resync run.  The daemon modules'
rule clean-up runs ``locked`` with a plan of its own.

A plan is a list of steps (one per family for iptables, one for the
nftables table), written in order.  When a step fails after an earlier one
was written, the error says exactly what was already applied (and
``changed`` is true), instead of leaving the user to guess.  A step may
carry its own undo (a switch from one backend to the other does): then the
steps already written are undone, in reverse order, so that the node keeps
the policy it had, in the backend it had it in.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.lock import Lock


class Step:
    """One write: a label (``IPv4``), what it does, the function doing it
    and, optionally, the function that takes it back.  ``kinds``: what each
    action repairs, one machine-readable word per action (``chain_missing``,
    ``table_rewritten``, ...: the vocabulary is in ``metrics.py``)."""

    def __init__(self, label, actions, write, undo=None, kinds=()):
        self.label = label
        self.actions = list(actions)
        self.write = write
        self.undo = undo
        self.kinds = list(kinds)

    def described(self):
        return ['%s: %s' % (self.label, a) for a in self.actions]


def _labels(steps):
    return ' and '.join(s.label for s in steps)


class Plan:
    """The steps that bring a node to the wanted state (empty: nothing to do)."""

    def __init__(self, steps=()):
        self.steps = list(steps)

    @property
    def changed(self):
        return bool(self.steps)

    @property
    def actions(self):
        return [a for step in self.steps for a in step.described()]

    @property
    def kinds(self):
        """The steps' kinds, in the order of ``actions``."""
        return [k for step in self.steps for k in step.kinds]

    def apply(self):
        """Write every step in order.  When one fails: undo the written steps
        that can be undone (newest first), and report exactly what was
        applied, undone and kept."""
        done = []
        for step in self.steps:
            try:
                step.write()
            except MasqError as e:
                if not done:
                    raise
                raise _after_failure(e, done)
            done.append(step)


def _after_failure(error, done):
    """The error to raise when a step failed after the steps ``done`` were written."""
    undone, kept, failed = [], [], []
    for step in reversed(done):
        if step.undo is None:
            kept.insert(0, step)
            continue
        try:
            step.undo()
        except MasqError as e:
            failed.append((step, e))
            kept.insert(0, step)
        else:
            undone.insert(0, step)
    details = dict(error.details)
    first = error.msg.rstrip('.') + '.'
    if not kept:
        details.update(changed=False, undone=[a for s in undone for a in s.described()])
        return MasqError('%s What was written before it (%s) was undone: the node is as it was. Nothing was changed.'
                         % (first, _labels(undone)), **details)
    applied = [a for s in kept for a in s.described()]
    details.update(changed=True, applied=applied, undone=[a for s in undone for a in s.described()])
    text = '%s %s %s already applied and %s kept: %s.' % (
        first, _labels(kept), 'was' if len(kept) == 1 else 'were', 'is' if len(kept) == 1 else 'are',
        '; '.join(applied))
    if undone:
        text += ' %s %s undone.' % (_labels(undone), 'was' if len(undone) == 1 else 'were')
    for step, e in failed:
        text += ' Undoing %s failed as well: %s' % (step.label, e.msg.rstrip('.') + '.')
    return MasqError(text + ' Fix the problem above and run again to finish.', **details)


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def locked(read, plan, check_mode=False, lock=None):
    """Hold the writers' lock while ``read()`` -> ``plan(reading)`` -> write.
    Returns ``(reading, plan)``; in check mode nothing is locked or written."""
    with _NoLock() if check_mode else (lock or Lock()):
        reading = read()
        todo = plan(reading)
        if not check_mode:
            todo.apply()
    return reading, todo


def sync(policy, backend, state='present', check_mode=False, chain=None, adopt=False, lock=None):
    """Make the node match ``policy`` (``state=present``) or remove every
    object of ours (``state=absent``; ``policy`` may then be None and
    ``chain`` names what to remove).  Returns the module's result dict;
    raises MasqError on failure, with nothing written unless it says so."""
    if state not in ('present', 'absent'):
        raise MasqError("state: %r is not one of 'present', 'absent'." % (state,))
    if state == 'present' and policy is None:
        raise MasqError('state=present needs a policy.')
    want = policy if state == 'present' else None
    with _no_cyclic_gc():
        reading, todo = locked(lambda: backend.read(want, chain),
                               lambda seen: backend.plan(seen, want, chain, adopt),
                               check_mode=check_mode, lock=lock)
        return backend.result(reading, todo, want, state)


class _no_cyclic_gc:
    """A run reads tens of thousands of rules or set elements into objects
    that hold no reference cycles; Python's cyclic collector would walk them
    again and again as they are made (a fifth of a no-change run with 20,000
    CIDRs).  Reference counting still frees everything."""

    def __enter__(self):
        import gc  # pylint: disable=import-outside-toplevel

        self.gc = gc
        self.was = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            self.gc.enable()
        return False
