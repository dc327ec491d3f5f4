# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What every backend is: a place the policy can live, or where ours can be
found and removed.  ``backends.py`` holds the registry and runs them all.

A backend is built once per run from the node's :class:`Node` (how to run
and find tools, ask /proc and the kernel).  One run's reading of every
backend is a :class:`NodeReading`; each backend keeps what it read there,
under its name (``reading.of[name]``).

The SNAT audit (``_audit/``) reads every backend too, only reading:
``audit_read`` returns what the backend's own readers show of the node's
nat rules as :class:`AuditFinding` objects, once per family and once for
what belongs to no family; ``audit_rank`` is the order the audit reads and
lists them in, ``audit_listings`` the only commands it may run for that.
The audit judges and words the findings without knowing which technology
they came from.

The coordinator's loop: the chosen backend reads and writes the policy
(``read``, ``plan_present``); every other registered backend looks for ours
(``look``: a cheap question to the kernel first, a tool only when something
is there) and removes it in the same run (``plan_absent``).  The result is
what each backend reports (``report``).

Standard library only: this file runs on managed nodes.
"""


class Node:
    """How a run reaches the node: ``run(argv, data=None)``, ``find(name)``,
    ``proc_read(path)`` (lines of a /proc file) and ``probe(questions)``
    (whether nf_tables holds a table or chain: ``nfnetlink.exist``)."""

    def __init__(self, run, find, proc_read, probe):
        self.run = run
        self.find = find
        self.proc_read = proc_read
        self.probe = probe
        self.backends = {}      # name -> Backend of this run (filled by backends.Backends)


class NodeReading:
    """What one run read of every backend, and which one it chose."""

    def __init__(self, chain):
        self.chain = chain
        self.selected = None
        self.reason = None
        self.of = {}            # backend name -> what that backend read (its own object)
        self.shared = {}        # facts backends of one kind share within a run (the iptables flavours)

    def select(self, backend, reason):
        self.selected, self.reason = backend, reason


class AuditTable:
    """One table an audit reading found, in no technology's terms.
    ``name``: as the result's ``audited`` line names it; ``families``: the
    IP families its rules can act on (4, 6); ``sources(chain)``: its SNAT
    rules as the audit's source records (``_audit.walk.source``), those of
    ``chain`` ours; ``listed``: named in ``audited`` even without a SNAT
    rule; ``key``: the same table as another reading can show it (a finding
    whose ``shows`` holds the key stands for it, and this one is left out)."""

    def __init__(self, name, families, sources, listed=True, key=None):
        self.name = name
        self.families = tuple(families)
        self.sources = sources
        self.listed = listed
        self.key = key


class AuditFinding:
    """What one backend's ``audit_read`` found: ``backend`` (the name of the
    backend that read it), ``family`` (4, 6, or None: no one family),
    ``place`` (the backend whose tables these are: the result's ``ours_in``
    names it) and ``home`` (the backend that writes the policy there:
    ``ours_backends``), ``tables`` (:class:`AuditTable`), ``audited`` (the
    result's ``audited`` line; with ``names`` set, followed by the names of
    the tables it lists in brackets, or ``names`` when it lists none),
    ``shows`` (keys of tables another reading holds too), ``notes`` (the
    result's notes, after those of the reading), and ``unread`` (ours, where
    it could not be read: ``(note, clause)``, the result's note and the
    summary's clause, and the audit is not only ours)."""

    def __init__(self, backend, family, place, home, audited, tables=(), names=None, shows=(), notes=(),
                 unread=None):
        self.backend = backend
        self.family = family
        self.place = place
        self.home = home
        self.audited = audited
        self.tables = list(tables)
        self.names = names
        self.shows = frozenset(shows)
        self.notes = list(notes)
        self.unread = unread

    def line(self, names):
        """The result's ``audited`` line, with the ``names`` of the tables it lists."""
        if self.audited is None or self.names is None:
            return self.audited
        return '%s (%s)' % (self.audited, ', '.join(names) if names else self.names)


class Backend:
    """The interface.  ``writes``: the policy can live here (a value of the
    module's ``backend`` option); a backend that does not write is only
    looked in, for ours to remove."""

    name = None
    writes = True
    audit_rank = None       # the SNAT audit's order (None: the audit does not read this backend)
    audit_listings = ()     # what audit_read may run: (tool name regex, its exact arguments)

    def __init__(self, node):
        self.node = node

    def available(self):
        """Whether the tools this backend needs are installed."""
        raise NotImplementedError

    def state(self, reading):
        """What this backend read in ``reading`` (None: not read)."""
        return reading.of.get(self.name)

    def holds_ours(self, reading):
        """After a read or a look: whether ours is there."""
        raise NotImplementedError

    def ours_text(self, reading):
        """Ours, in words (``our nftables table inet ip-masq-agent``), for the reason auto chose this backend."""
        raise NotImplementedError

    def read(self, reading, policy):
        """Read what writing ``policy`` here needs (this backend was chosen)."""
        raise NotImplementedError

    def look(self, reading, why):
        """Read ours, to remove it: another backend was chosen (``why``:
        ``'asked'`` or ``'auto'``) or ``state=absent`` (``why`` ``'absent'``)."""
        raise NotImplementedError

    def after_look(self, reading):
        """Called once every backend has looked (an error that needs them all)."""

    def plan_present(self, reading, policy, adopt):
        """The steps that write ``policy`` here (each with its undo)."""
        raise NotImplementedError

    def plan_absent(self, reading, adopt, strict, undo):
        """The steps that remove ours.  ``strict``: a thing of our name that
        is not ours is an error (else it is left alone, with a note);
        ``undo``: each step can be taken back where this backend can."""
        raise NotImplementedError

    @staticmethod
    def rules_in_place(result, policy):
        """``{family: rules}`` of ours in place after a run that chose this
        backend, from its ``result`` (the ``rules`` metric)."""
        return {}

    def audit_read(self, view, family):
        """The SNAT audit's reading, never a change (``view.run`` refuses
        anything but the registered backends' ``audit_listings``): this
        backend's nat rules of ``family`` (4 or 6), or with ``family`` None
        those that belong to no family, as a list of :class:`AuditFinding`.
        ``view`` (``_audit.node.View``) holds how to reach the node, the
        audit's ``chain`` and ``notes``, and what a kind of backend shares
        across its reads (``view.kept``)."""
        return []

    @classmethod
    def audit_words(cls, chain, advice):
        """The SNAT audit's words for ours (``chain``) in this backend:
        ``ours`` names it where ours is in two backends at once.  A backend
        with several tables that packets all pass (``AuditFinding.place``)
        adds ``split``, the summary's clause for ours in more than one, and
        ``split_line``, that problem with what to do for ``advice``
        (``module``, ``role``, ``check``: who applies the policy)."""
        return {'ours': cls.name}

    def report(self, reading, plan, policy, state, result):
        """Add this backend's keys, commands and warnings to the module's
        ``result``; returns warnings to add after every backend's own."""
        raise NotImplementedError
