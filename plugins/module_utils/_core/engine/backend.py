# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""What every backend is: a place the policy can live, or where ours can be
found and removed.  ``_core/registry/backends.py`` holds the registry and runs them all.

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
what each backend reports (``report``); every consumer of the result asks
each backend for its own words (:class:`Backend` lists them all).  Backends
of one family that read together keep what they share in one object of
their own class (``reading.share(cls)``), never in string keys.

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


class NodeReading:
    """What one run read of every backend, and which one it chose."""

    def __init__(self, chain):
        self.chain = chain
        self.selected = None
        self.reason = None
        self.of = {}            # backend name -> what that backend read (its own object)
        self._shared = {}       # class -> its one object of this run (share)

    def select(self, backend, reason):
        self.selected, self.reason = backend, reason

    def share(self, cls):
        """The one ``cls()`` of this run: what a family of backends read
        together (``backend_iptables.IptablesShared`` for the iptables
        flavours), made on first ask.  Its class is its key: each family
        owns its class, with named attributes."""
        found = self._shared.get(cls)
        if found is None:
            found = self._shared[cls] = cls()
        return found


class AuditTable:
    """One table an audit reading found, in no technology's terms.
    ``name``: as the result's ``audited`` line names it; ``families``: the
    IP families its rules can act on (4, 6); ``sources(chain)``: its SNAT
    rules as the audit's source records (``_core.engine.walk.source``), those of
    ``chain`` ours; ``listed``: named in ``audited`` even without a SNAT
    rule; ``key``: the same table as another reading can show it (a finding
    whose ``shows`` holds the key stands for it, and this one is left out);
    ``programs(chain)``: its nat postrouting base chains as
    ``_core.engine.trace.Program`` objects, those of ``chain`` ours (what the
    SNAT explanation follows a flow through; None: not explained).  A
    backend loads its explanation code only when ``programs`` is called:
    an audit never calls it (tests/integration/test_explain_loading.py)."""

    def __init__(self, name, families, sources, listed=True, key=None, programs=None):
        self.name = name
        self.families = tuple(families)
        self.sources = sources
        self.listed = listed
        self.key = key
        self.programs = programs


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


class RuleMatch:
    """What a daemon's clean-up removes (``backends.Backends.remove_rules``),
    never ours.  Each backend that removes such rules (its ``match_part``)
    asks the part of the match in the terms of the tables it reads, and
    plans and words the removal itself:

    * ``nat(family, table) -> (rules, chains)``: of an iptables nat table
      (``iptables_save.NatTable``), the rules to delete and the chains,
      empty, to delete;
    * ``nft(tables) -> [(text, what)]``: of the nft ruleset
      (``nft_json.NftTable`` by ``(family, name)``), each thing to remove in
      words (the result's ``removed_rules``; ``table.rule_text(rule)`` is a
      rule as nft prints it) and what it is: ``('rule', family, table,
      chain, rule)`` or ``('chain', family, table, chain)``.

    A part left None: that backend is not asked."""

    def __init__(self, nat=None, nft=None):
        self.nat = nat
        self.nft = nft


class Backend:
    """The interface: every member any caller uses, each with its contract.
    A member without a default (``NotImplementedError``) is what a backend
    must write; the rest have one that fits a simple backend.

    The registry (``backends.Backends``) calls, per run: ``read`` (asked
    for) or ``candidate`` -> ``holds_ours`` -> ``ours_text`` and
    ``new_home`` -> ``before_other_home`` (auto); ``look`` on every other
    backend, then ``after_look`` on all; ``plan_present`` / ``plan_absent``;
    ``report``.  The consumers of a run's result ask the backend for its own
    words: ``diff_text`` (diff mode), ``msg_parts`` (the one-line message),
    ``log_lines`` / ``in_sync_text`` / ``drift_words`` (the resync's journal),
    ``rules_in_place`` / ``drift_kinds`` / ``metric_help`` (the metrics),
    ``drift_report`` and ``fleet_report_words`` (the SNAT report).  The role asks for ``tool``,
    ``tool_key`` and ``packages``; the daemons' clean-up for ``removal``
    (of the backends with a ``match_part``);
    the SNAT audit for ``audit_read``."""

    # -- what it is ----------------------------------------------------------

    name = None             # the module's ``backend`` choice (a writer), the result's ``selected_backend``
    writes = True           # the policy can live here; else it is only looked in, for ours to remove
    audit_rank = None       # the SNAT audit's order (None: the audit does not read this backend)
    installed_text = None   # auto's reason for a new node: ``'auto: ... where <installed_text>'``
    tools_text = None       # a writer: its tools in words, for auto's error when no writer is installed (None: the name)
    tool = None             # a writer: the program whose presence means it can write here (the role checks it)
    tool_key = None         # the key of ``tool`` in ip_masq_node's ``tools`` result (None: the name)
    packages = ()           # a writer: ``((os_family, min_major_version, package), ...)``, the first that fits
    #                         the node (``('', 0, ...)`` fits every node): what installs ``tool``
    drift_kinds = ()        # a writer: the kinds of its plans' actions (the metric's ``kind`` labels), in order
    metric_help = None      # a writer: how the ``rules`` metric counts it, in words (``rules_in_place``)
    result_keys = ()        # a writer: its keys of the result that carry a ``drift`` (the SNAT report's ``chain_drift``)
    diff_rank = 50          # the order of ``diff_text``'s sections (lowest first; the registry's order among equals)
    audit_listings = ()     # what audit_read may run: (tool name regex, its exact arguments)
    match_part = None       # the part of a daemon's RuleMatch this backend removes by (None: it removes none)
    audit_tool = None       # the tool audit_read reads with, in words: the audit's error names it when no
    #                         backend's tool is installed (``packages`` says what installs it)

    def __init__(self, node):
        self.node = node

    @classmethod
    def package(cls, os_family, major):
        """The package that installs ``tool`` on a node of ``os_family``
        (``ansible_facts['os_family']``) and major version ``major``; None
        for a backend without one."""
        for family, since, name in cls.packages:
            if family in ('', os_family) and major >= since:
                return name
        return None

    # -- reading -------------------------------------------------------------

    def available(self):
        """Whether the tools this backend needs are installed."""
        raise NotImplementedError

    def state(self, reading):
        """What this backend read in ``reading`` (None: not read)."""
        return reading.of.get(self.name)

    def was_read(self, reading):
        """Whether this run read this backend (a ``read``, a ``candidate``
        or a ``look`` that asked its tools)."""
        return self.state(reading) is not None

    def holds_ours(self, reading):
        """After a read or a look: whether ours is there."""
        raise NotImplementedError

    def ours_text(self, reading):
        """Ours, in words (``our nftables table inet ip-masq-agent``), for the reason auto chose this backend."""
        raise NotImplementedError

    def read(self, reading, policy):
        """Read what writing ``policy`` here needs (this backend was chosen)."""
        raise NotImplementedError

    def candidate(self, reading, policy, tolerate):
        """auto: read, where this backend is available, enough to tell
        whether ours is here (``holds_ours``).  ``tolerate``: a backend
        before this one was read, so a failure to read this one may be a
        note rather than an error."""
        if self.available():
            self.read(reading, policy)

    def new_home(self, reading):
        """auto, a node with ours in no backend: whether the policy can go
        here (the first writer that says so gets it; ``read`` follows when
        ``was_read`` is still false)."""
        return self.available()

    def before_other_home(self, reading):
        """auto gave a new node another backend: raise MasqError when
        something of ours here could then be neither kept nor removed."""

    def look(self, reading, why):
        """Read ours, to remove it: another backend was chosen (``why``:
        ``'asked'`` or ``'auto'``) or ``state=absent`` (``why`` ``'absent'``)."""
        raise NotImplementedError

    def after_look(self, reading):
        """Called once every backend has looked (an error that needs them all)."""

    # -- planning ------------------------------------------------------------

    def plan_present(self, reading, policy, adopt):
        """The steps that write ``policy`` here (each with its undo)."""
        raise NotImplementedError

    def plan_absent(self, reading, adopt, strict, undo):
        """The steps that remove ours.  ``strict``: a thing of our name that
        is not ours is an error (else it is left alone, with a note);
        ``undo``: each step can be taken back where this backend can."""
        raise NotImplementedError

    def removal(self, match):
        """The daemons' clean-up of rules that are not ours (a daemon's
        masquerading): ``(read, plan)`` for ``sync.locked``, which the
        registry runs under the writers' lock (``backends.Backends.remove``),
        removing what ``match`` (:class:`RuleMatch`, its ``match_part``)
        picks; None where this backend's tools are not installed."""
        return None

    def removal_notes(self, reading):
        """Warnings of a removal's ``reading``: what it could not check."""
        return []

    def missing_text(self):
        """Why ``removal`` found nothing to read (its tools are missing), as
        the daemons' result says it."""
        return '%s not found; nothing checked.' % self.name

    # -- the result ----------------------------------------------------------

    def report(self, reading, plan, policy, state, result):
        """Add this backend's keys, commands and warnings to the module's
        ``result``; returns warnings to add after every backend's own."""
        raise NotImplementedError

    @staticmethod
    def rules_in_place(result, policy):
        """``{family: rules}`` of ours in place after a run that chose this
        backend, from its ``result`` (the ``rules`` metric)."""
        return {}

    @staticmethod
    def diff_text(result, which):
        """Diff mode: what this backend's keys of ``result`` show of ours,
        ``which`` ``'before'`` or ``'after'`` the run, as text ('' for none)."""
        return ''

    @classmethod
    def holds_policy(cls, result):
        """A writer: whether ``result`` says the policy lives here after the run."""
        return cls.writes and result.get('state', 'present') == 'present' and result.get('selected_backend') == cls.name

    @staticmethod
    def msg_parts(result, check_mode, present, elsewhere):
        """The one-line message's words for this backend: ``(changed,
        steady, later)`` lists (``later``: removals said after every
        backend's ``changed``, ours under another name); ``present``: state
        present; ``elsewhere``: another backend holds the policy."""
        return [], [], []

    @staticmethod
    def log_lines(result):
        """The resync's debug lines: what this backend wrote (its tools' input)."""
        return []

    @staticmethod
    def in_sync_text(result):
        """The resync's verbose line when nothing was written and this
        backend holds the policy: ``in sync: <this>; nothing written.``"""
        return 'in sync: %s (%s); nothing written.' % (result.get('selected_backend'),
                                                       result.get('selected_backend_reason'))

    @staticmethod
    def drift_words(result, action, said):
        """The rules a rewrite ``action`` of this backend puts back or takes
        out, in words ('' for an action that is not this backend's, or one
        said already: ``said`` records what was)."""
        return ''

    @staticmethod
    def drift_report(result):
        """The SNAT report: ``(drift, words)`` of a ``masq_chain`` result
        that chose this backend: whether the run rewrote ours here
        (``'missing'``, ``'drifted'`` or None), and the rules it put back or
        took out, in words."""
        return None, []

    @staticmethod
    def fleet_report_words(chain):
        """The fleet report's words for ours (``chain``) in this backend
        (the ``snat_report`` filter): ``by_hand``, how to remove ours here
        by hand, and, for a backend with several tables that packets all
        pass, ``split``, those tables (``our policy is in both <split>``).
        Either may be missing."""
        return {}

    # -- the SNAT explanation after the role ----------------------------------

    @classmethod
    def after_run(cls, tool, argv, data, results, run):
        """The explanation's after mode (``_explain/after.py``): ``(rc, out,
        err)`` of this backend's command ``argv`` (``tool`` its program's
        name, ``data`` its stdin) as the node will answer once the policy
        runs ``results`` (masq_chain results, check mode) are written, read
        through ``run`` with their writes applied in memory; a write is
        refused (MasqError).  None: not this backend's command."""
        return None

    @classmethod
    def after_write(cls, tool, argv, data, run):
        """The explanation's after mode: a daemon's clean-up (``_daemons/base.remove_rules``)
        writes its planned removal of this backend's command ``argv`` (stdin ``data``) into
        the projection, not the node: a result like a policy run's (what ``after_run``
        applies to the listings, in memory), read through ``run`` where it needs the node
        (never written).  None: not this backend's write."""
        return None

    @classmethod
    def after_notes(cls, result):
        """What the policy run ``result`` would write in this backend that an
        answer after the role does not show, in words."""
        return []

    # -- the SNAT audit --------------------------------------------------------

    def audit_read(self, view, family):
        """The SNAT audit's reading, never a change (``view.run`` refuses
        anything but the registered backends' ``audit_listings``): this
        backend's nat rules of ``family`` (4 or 6), or with ``family`` None
        those that belong to no family, as a list of :class:`AuditFinding`.
        ``view`` (``_core.registry.audit_view.View``) holds how to reach the node, the
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
