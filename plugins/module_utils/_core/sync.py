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

A plan is a list of steps (one per family for iptables), written in order.
When a step fails after an earlier one was written, the error says exactly
what was already applied (and ``changed`` is true), instead of leaving the
user to guess.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.lock import Lock


class Step:
    """One write: a label (``IPv4``), what it does, and the function doing it."""

    def __init__(self, label, actions, write):
        self.label = label
        self.actions = list(actions)
        self.write = write

    def described(self):
        return ['%s: %s' % (self.label, a) for a in self.actions]


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

    def apply(self):
        """Write every step in order; report exactly what was applied when one fails."""
        done = []
        for step in self.steps:
            try:
                step.write()
            except MasqError as e:
                if not done:
                    raise
                applied = [a for s in done for a in s.described()]
                details = dict(e.details)
                details.update(changed=True, applied=applied)
                raise MasqError('%s %s %s already applied and %s kept: %s. Fix the problem above and run again to '
                                'finish.' % (e.msg.rstrip('.') + '.', ' and '.join(s.label for s in done),
                                             'was' if len(done) == 1 else 'were',
                                             'is' if len(done) == 1 else 'are', '; '.join(applied)),
                                **details)
            done.append(step)


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
    reading, todo = locked(lambda: backend.read(want, chain),
                           lambda seen: backend.plan(seen, want, chain, adopt),
                           check_mode=check_mode, lock=lock)
    return backend.result(reading, todo, want, state)
