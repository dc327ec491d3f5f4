# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Which backend holds the policy on a node, and the switch between them.

``backend``: ``iptables`` (``_core/iptables_backend/chain.py``: the chain and its POSTROUTING
jump), ``nftables`` (``_core/nftables_backend/table.py``: the table ``inet <chain in lower
case>``) or ``auto``, which never moves a node by itself:

1. a node with our iptables chain (IPv4 or IPv6) stays on iptables;
2. else a node with our nftables table stays on nftables;
3. else (a new node): iptables where ``iptables-save`` and
   ``iptables-restore`` are installed, nftables where only ``nft`` is.

The policy lives in one backend only.  Every run looks for ours in the
backend it does not write to, and removes what it finds in the same run,
under the same lock: the new policy is written first, then the old one
removed, and when a step of a switch fails the steps already written are
undone, so that a node is never left with neither policy, nor with both.
Looking costs next to nothing: the kernel is asked over nfnetlink whether
our table (from an iptables run) or iptables-nft's chain of ours, or a rule
there that carries our comment (ours under an old chain name), from an
nftables run, exists (``_core/node/nfnetlink.py``), /proc says whether a legacy nat
table exists at all, and a tool runs only when something is there.
``state=absent`` removes ours from both.

The backends (``backend.Backend``) are registered in :data:`REGISTRY`, in
the order they are tried, planned and reported: ``iptables``
(``_core/iptables_backend/backend.py``), ``nftables`` (``_core/nftables_backend/backend.py``), and the
two iptables flavours, ``iptables-legacy`` and ``iptables-nft``
(``_core/iptables_backend/flavours.py``), which do not write: they only hold ours to remove.
A backend is new files plus one line here (or, for a test's backend, one
call of :func:`register`): every consumer of a run's result (diff mode,
the msg, the resync's journal, the metrics, the SNAT report, the role's
tools and packages) loops over the registry and asks each backend for its
own words (``backend.Backend``), and the daemons' clean-up of their rules
goes through :meth:`Backends.remove` (one ``backend.RuleMatch`` over every
backend with a ``match_part``).

iptables itself comes in two flavours, each with nat tables of its own in
the kernel: legacy (x_tables) and iptables-nft (nf_tables).  The tools on
PATH write to one; every run also looks for ours in the other one (a legacy
nat table that /proc lists, iptables-nft's chain that the kernel holds),
reads it with that flavour's own tools (``iptables-legacy-save``,
``iptables-nft-save``) and removes it in the same run
(``_core/iptables_backend/flavours.py``).  Where those tools are
not installed, a chain of ours the kernel holds there (``_core/iptables_backend/xtables_kernel.py``
asks it, for legacy) is an error that says where it is and how to remove it.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import nfnetlink
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import Backend, Node, NodeReading
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.flavours import IptablesLegacy, IptablesNft
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.backend import IptablesOnPath
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.backend import Nftables
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import names as nft_names
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError, one_line
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.proc import read_proc
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import validate_chain_name
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.sync import locked as sync_locked
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import Plan

# The registry: every backend, in the order they are tried (auto), planned and reported.
REGISTRY = (
    IptablesOnPath,
    Nftables,
    IptablesLegacy,
    IptablesNft,
)
BACKENDS = ('auto',) + tuple(b.name for b in REGISTRY if b.writes)


def register(cls):
    """Add the backend class ``cls`` (a ``backend.Backend``) to the end of
    the registry, and its name to the ``backend`` choices when it writes;
    returns the function that takes it out again.  For a backend that lives
    outside plugins/ (the tests' ``tests/lab/ipmasq_lab/backend_probe.py``):
    every consumer loops over the registry, so this line is all it needs."""
    global REGISTRY, BACKENDS  # pylint: disable=global-statement
    if not issubclass(cls, Backend) or not cls.name or any(b.name == cls.name for b in REGISTRY):
        raise MasqError('internal error: %r is not a backend of a new name.' % (cls,))
    REGISTRY = REGISTRY + (cls,)
    BACKENDS = BACKENDS + ((cls.name,) if cls.writes else ())

    def unregister():
        global REGISTRY, BACKENDS  # pylint: disable=global-statement
        REGISTRY = tuple(b for b in REGISTRY if b is not cls)
        BACKENDS = tuple(b for b in BACKENDS if b != cls.name)
    return unregister


def writers():
    """The registered backends the policy can live in (classes), in the registry's order."""
    return [cls for cls in REGISTRY if cls.writes]


def nf_tables_of_ours(chain):
    """``(family, table)`` of every nf_tables table a policy of ``chain``
    can live in: iptables-nft's nat tables and our nftables table (the
    resync's watch mode acts on changes to these only)."""
    return (('ip', 'nat'), ('ip6', 'nat'), (nft_names.FAMILY, nft_names.table_name(chain)))


def needed_tools(choice):
    """The tools the ``backend`` ``choice`` needs, any one of them: the
    writer's own (``tool``), or every writer's for ``auto``."""
    return tuple(cls.tool for cls in writers() if choice in ('auto', cls.name) and cls.tool)


def installed_tools(find):
    """``{tool_key: installed}`` of every writer's tool (the role's ``tools``)."""
    return dict((cls.tool_key or cls.name, bool(find(cls.tool))) for cls in writers() if cls.tool)


def check_backend(choice):
    if choice not in BACKENDS:
        raise MasqError('backend: %r is not one of %s.' % (choice, ', '.join("'%s'" % b for b in BACKENDS)))
    return choice


class Backends:
    """The policy in the backend ``choice`` picks, ours removed from every
    other registered backend; ``sync.sync`` runs its read -> plan -> write
    under the writers' lock.  ``probe`` answers whether nf_tables holds a
    table or chain (``nfnetlink.exist``)."""

    def __init__(self, run, find, choice='auto', proc_read=None, probe=None):
        self.choice = check_backend(choice)
        self.node = Node(run, find, proc_read or read_proc, probe or nfnetlink.exist)
        self.all = [cls(self.node) for cls in REGISTRY]
        self.by_name = dict((b.name, b) for b in self.all)
        self.writers = [b for b in self.all if b.writes]

    def get(self, name):
        return self.by_name[name]

    # -- reading -----------------------------------------------------------

    def read(self, policy, chain=None):
        chain = policy.chain if policy is not None else validate_chain_name(chain)
        reading = NodeReading(chain)
        if policy is None:
            looked = []                                 # state=absent: ours goes from every backend
            why = 'absent'
        elif self.choice != 'auto':
            chosen = self.get(self.choice)
            reading.select(chosen.name, 'asked for (backend=%s)' % chosen.name)
            chosen.read(reading, policy)
            looked, why = [chosen], 'asked'
        else:
            looked, why = self._auto(reading, policy), 'auto'
        for backend in self.all:
            if backend not in looked:
                backend.look(reading, why)
        for backend in self.all:
            backend.after_look(reading)
        return reading

    def _auto(self, reading, policy):
        """auto never moves a node: the first backend (in the registry's
        order) that holds ours keeps it; a new node gets the first one
        installed.  Returns the backends it read."""
        for i, backend in enumerate(self.writers):
            backend.candidate(reading, policy, tolerate=any(b.was_read(reading) for b in self.writers[:i]))
            if backend.holds_ours(reading):
                reading.select(backend.name, 'auto: the node has %s' % backend.ours_text(reading))
                return self.writers[:i + 1]
        for backend in self.writers:
            if backend.new_home(reading):
                for other in self.writers:
                    if other is not backend:
                        other.before_other_home(reading)
                reading.select(backend.name, 'auto: a node with neither policy yet, where %s' % backend.installed_text)
                if not backend.was_read(reading):
                    backend.read(reading, policy)
                return self.writers
        raise MasqError('Neither %s was found on the node; install %s. Nothing was changed.'
                        % (' nor '.join(b.tools_text or b.name for b in self.writers),
                           ' or '.join(b.package('', 0) or b.name for b in self.writers)))

    # -- planning ----------------------------------------------------------

    def plan(self, reading, policy, chain=None, adopt=False):
        """Write in the chosen backend, then remove ours from every other one
        (state=absent: from all).  In a switch, the write is undone when a
        removal fails; otherwise a family written stays written."""
        if policy is None:
            return Plan([s for b in self.all for s in b.plan_absent(reading, adopt, strict=True, undo=False)])
        chosen = self.get(reading.selected)
        writes = chosen.plan_present(reading, policy, adopt)
        removals = []
        for backend in self.all:
            if backend is chosen:
                continue
            steps = backend.plan_absent(reading, adopt, strict=False, undo=bool(writes))
            if backend.writes:
                for step in steps:
                    step.kinds = ['other_backend'] * len(step.actions)
            removals.extend(steps)
        if not removals:
            # Not a switch: a family written stays written when a later one fails.
            for step in writes:
                step.undo = None
        return Plan(writes + removals)

    # -- the daemons' clean-up ---------------------------------------------

    def cleaners(self, match):
        """The backends a daemon's clean-up asks (``backend.RuleMatch``):
        those with a ``match_part`` the match gives, in the registry's order."""
        return [b for b in self.all if b.match_part and getattr(match, b.match_part, None) is not None]

    def remove(self, backend, match, check_mode=False, locked=None):
        """Remove what ``match`` picks of ``backend``'s rules (its
        ``removal``: a daemon's masquerading, never ours), read, planned
        and written under the writers' lock by ``locked`` (default
        ``sync.locked``; check mode: read and planned only).  A write that
        fails (the rules changed since the read: a container torn down
        meanwhile, the plugins and runtimes do not take our lock) is read
        and planned again, once; what the first try applied stays.  Returns
        a :class:`Removal`, or None where that backend's tools are not
        installed (its ``missing_text`` says so)."""
        lock = locked or sync_locked
        found = backend.removal(match)
        if found is None:
            return None
        try:
            return Removal(*lock(found[0], found[1], check_mode=check_mode))
        except MasqError as e:
            if check_mode or not (e.details.get('cmd') or e.details.get('applied')):
                raise
            first = e
        applied = list(first.details.get('applied') or [])
        again = backend.removal(match)
        try:
            reading, plan = lock(again[0], again[1], check_mode=check_mode)
        except MasqError as e:
            applied += list(e.details.get('applied') or [])
            details = dict(e.details, changed=bool(applied), removed_rules=applied)
            kept = ' Removed before it, and kept: %s.' % '; '.join(applied) if applied else ''
            raise MasqError('the nat rules could not be removed, read again after a first failed write: %s.%s'
                            % (one_line(e.msg), kept), **details)
        return Removal(reading, plan, applied, first)

    # -- the result --------------------------------------------------------

    def result(self, reading, plan, policy, state):
        """The ``masq_chain`` module's result: what each backend reports."""
        result = {'changed': plan.changed, 'chain': reading.chain, 'state': state, 'commands': [],
                  'actions': plan.actions, 'warnings': list(policy.warnings) if policy is not None else []}
        late = []
        for backend in self.all:
            late.extend(backend.report(reading, plan, policy, state, result))
        result['warnings'].extend(late)
        result.update(selected_backend=reading.selected, backend_reason=reading.reason, drift_kinds=plan.kinds)
        # The reason names what it explains (selected_backend); backend_reason is its deprecated name.
        result['selected_backend_reason'] = reading.reason
        return result


class Removal:
    """What ``Backends.remove`` did: the backend's ``reading`` and ``plan``
    (written, or only planned in check mode); ``retried``: the error of a
    first write that failed (then read again), whose ``applied`` actions
    stay; ``actions``: everything removed (or that would be)."""

    def __init__(self, reading, plan, applied=(), retried=None):
        self.reading = reading
        self.plan = plan
        self.applied = list(applied)
        self.retried = retried

    @property
    def actions(self):
        return self.applied + list(self.plan.actions)


def diff_text(result, which):
    """Text for diff mode, ``which`` ``'before'`` or ``'after'`` the run:
    each backend's own (``diff_text``), in the order of their ``diff_rank``."""
    return ''.join(cls.diff_text(result, which) for cls in sorted(REGISTRY, key=lambda cls: cls.diff_rank))


def msg_parts(result, check_mode):
    """The ``masq_chain`` one-line message's words (``_msg.chain_msg``):
    ``(changed, steady)``, each backend's own (``msg_parts``), registry's
    order, except that what the backend holding the policy changed comes
    first (a switch writes the policy there, then removes ours from the
    other one: backends.rst, "Switching a node"); what each says later (ours
    under another name) after every backend's ``changed``."""
    present = result.get('state', 'present') == 'present'
    first, changed, steady, later = [], [], [], []
    for cls in REGISTRY:
        elsewhere = any(other.holds_policy(result) for other in REGISTRY if other.writes and other is not cls)
        c, s, l = cls.msg_parts(result, check_mode, present, elsewhere)
        (first if cls.holds_policy(result) else changed).extend(c)
        steady.extend(s)
        later.extend(l)
    return first + changed + later, steady


def log_lines(result):
    """The resync's debug lines of a run that wrote: each backend's tools' input."""
    return [line for cls in REGISTRY for line in cls.log_lines(result)]


def in_sync_text(result):
    """The resync's verbose line of a run that wrote nothing: the selected backend's."""
    for cls in REGISTRY:
        if cls.writes and cls.name == result.get('selected_backend'):
            return cls.in_sync_text(result)
    return Backend.in_sync_text(result)


def drift_words(result, action, said):
    """The rules a sync ``result``'s rewrite ``action`` puts back or takes
    out, as words to follow the action in a log line ('' for any other
    action); each backend says its own (``drift_words``), once per family or
    table (``said``, a set, records which ones were)."""
    for cls in REGISTRY:
        words = cls.drift_words(result, action, said)
        if words:
            return words
    return ''
