# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``nftables`` backend (``backend.Backend``): our own table ``inet <chain
in lower case>``, written in one ``nft -j -f -`` transaction
(``rules.py`` spells the table, ``table.py`` plans, ``tools.py``
runs nft).  Those three and the JSON reader are loaded at their first use:
where the kernel says that no table of ours exists, nft is never run and a
resync cycle (a fresh python3 that pays for every module) does not load
them (``names.py`` is all it needs).

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import Backend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.names import (
    CHAIN,
    FAMILY,
    NAME,
    table_label,
    table_name,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import Plan, Step


class _PicksStep(Step):
    """The one transaction of a ``removal``: its actions already say where."""

    def described(self):
        return list(self.actions)


def _nothing_applied(call, *args):
    """``call(*args)``, a removal's picking or its transaction: a failure
    says that no part of the nft transaction was applied (it is atomic)."""
    try:
        return call(*args)
    except MasqError as e:
        msg = e.msg.rstrip('.') + '.'
        if 'nft transaction' not in msg:
            msg += ' No part of the nft transaction was applied.'
        raise MasqError(msg, **e.details)


def _picks(match, tables):
    """What ``match`` picks of ``tables`` (None: the ruleset was not read), and the commands that remove it."""
    # Start-up cost: the JSON reader is loaded only by a run that lists nft's ruleset.
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import deletion  # pylint: disable=import-outside-toplevel

    picked = match.nft(tables) if tables is not None else None
    return picked, [command for _text, what in picked or () for command in deletion(what)]


class NftState:
    """What the nftables backend read in one run."""

    def __init__(self, chain):
        self.name = table_name(chain)
        self.read = False
        self.table = None       # nft_json.NftTable of ours, when it exists
        self.note = None        # why nft was not run
        self.plan = None        # nftables.TablePlan, once planned
        self.others = {}        # name -> nft_json.NftTable: ours under another name (a renamed chain's table)


class Nftables(Backend):
    """The policy in our nftables table."""

    name = NAME
    installed_text = 'only nft is installed'
    tools_text = 'nft'
    audit_rank = 3
    audit_tool = 'nft'
    match_part = 'nft'
    tool = 'nft'
    tool_key = 'nft'
    packages = (('', 0, 'nftables'),)
    drift_kinds = (
        'table_missing',        # our table was not there (created)
        'table_rewritten',      # the table differed (replaced whole)
    )
    metric_help = 'nftables: the rules of our chain that match the family'
    result_keys = ('nftables',)
    diff_rank = 2
    audit_listings = (('nft', ('-j', 'list', 'ruleset')),)

    def __init__(self, node):
        Backend.__init__(self, node)
        self.path = node.find(self.tool)
        self._nft = None

    @property
    def nft(self):
        """The node's nft (``tools.NftTools``), made at its first use."""
        if self._nft is None:
            # Start-up cost: the nft tools (and the JSON reader) are loaded only by a run that runs nft.
            from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.tools import NftTools  # pylint: disable=import-outside-toplevel

            self._nft = NftTools(self.node.run, self._found)
        return self._nft

    def _found(self, _name):
        """nft's path, as found once in ``__init__`` (``NftTools``' ``find``)."""
        return self.path

    def available(self):
        return bool(self.path)

    def state(self, reading):
        st = reading.of.get(self.name)
        if st is None:
            st = reading.of[self.name] = NftState(reading.chain)
        return st

    def was_read(self, reading):
        return self.state(reading).read

    def holds_ours(self, reading):
        st = self.state(reading)
        return st.table is not None or bool(st.others)

    def ours_text(self, reading):
        st = self.state(reading)
        names = ([st.name] if st.table is not None else []) + sorted(st.others)
        return 'our nftables %s' % ', '.join(table_label(name) for name in names)

    def _list(self, reading):
        st = self.state(reading)
        st.table = self.nft.listing(st.name)
        st.read = True

    def _other_names(self, reading, names):
        """The other tables of our family that may be ours (a renamed
        chain's): each has a chain of our chain's name (asked of the kernel).
        ``names``: the family's tables as the kernel listed them (None: it
        could not be asked; nft lists them)."""
        st = self.state(reading)
        if names is False:
            return []
        if not isinstance(names, list):
            names = self.nft.table_names()
        names = [name for name in names if name != st.name]
        if not names:
            return []
        found = self.node.probe([('chain', FAMILY, name, CHAIN) for name in names])
        return [name for name, answer in zip(names, found) if answer is not False]

    def _list_others(self, reading, names):
        """Ours among ``names``: tables whose rules carry our comment."""
        # Start-up cost: the planner is loaded only by a run that lists a table.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.table import (  # pylint: disable=import-outside-toplevel
            carries_our_comment,
        )

        st = self.state(reading)
        for name in names:
            table = self.nft.listing(name)
            if carries_our_comment(table):
                st.others[name] = table

    def read(self, reading, policy):
        if not self.available():
            # Start-up cost: the nft tools' module (its words for a missing nft) is loaded only when needed.
            from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.tools import (  # pylint: disable=import-outside-toplevel
                missing_nft,
            )

            raise MasqError(missing_nft() + ' Nothing was changed.')
        if not self.was_read(reading):
            self._list(reading)
            (names,) = self.node.probe([('tables', FAMILY)])
            self._list_others(reading, self._other_names(reading, names))

    def look(self, reading, why):
        """Our table, listed when the kernel has it (or cannot say), and
        ours under other names."""
        st = self.state(reading)
        if not self.available():
            st.note = 'nft not found: no nftables table to remove.'
            return
        found, names = self.node.probe([('table', FAMILY, st.name), ('tables', FAMILY)])
        others = self._other_names(reading, names)
        if found is False and not others:
            st.note = 'no %s (asked the kernel): nft not run.' % table_label(st.name)
            return
        if found is False:
            st.read = True
        else:
            self._list(reading)
        self._list_others(reading, others)

    def candidate(self, reading, policy, tolerate):
        """auto: look where nft is installed; with ``tolerate`` (a backend
        before it was read), a listing that fails is a note."""
        if not self.available():
            return
        try:
            self.look(reading, 'auto')
        except MasqError as e:
            if not tolerate:
                raise
            self.state(reading).note = 'nft could not list the ruleset (%s).' % e.msg.rstrip('.')

    def _step(self, plan, undo=None, kinds=None):
        self.nft.commands.append(' '.join(self.nft.argv()) + '  # the transaction')
        return Step('nftables', plan.actions, lambda commands=plan.commands: self.nft.load(commands), undo,
                    plan.kinds if kinds is None else kinds)

    def plan_present(self, reading, policy, adopt):
        # Start-up cost: the planner and the table's spelling are loaded only where nft runs.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.table import (  # pylint: disable=import-outside-toplevel
            plan_present,
            remove_others,
        )
        # Start-up cost, as above: the table's spelling.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.rules import (  # pylint: disable=import-outside-toplevel
            delete_commands,
        )

        st = self.state(reading)
        st.plan = remove_others(plan_present(st.table, policy, adopt), st.others)
        if not st.plan.changed:
            return []
        # The undo (a switch) deletes the table written; our tables under other names stay deleted.
        return [self._step(st.plan, undo=lambda: self.nft.load(delete_commands(st.name)))]

    def plan_absent(self, reading, adopt, strict, undo):
        """``undo`` is not supported: a deleted table is not put back (it goes last in a switch)."""
        st = self.state(reading)
        if st.table is None and not st.others:
            return []
        # Start-up cost: the planner is loaded only where there is a table of ours to delete.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.table import (  # pylint: disable=import-outside-toplevel
            plan_absent,
            remove_others,
        )

        st.plan = remove_others(plan_absent(st.table, st.name, adopt, strict=strict), st.others)
        return [self._step(st.plan)] if st.plan.changed else []

    def removal(self, match):
        """``match.nft(tables) -> [(text, what)]`` picks from the node's
        ruleset (``tables``: ``nft_json.NftTable`` by ``(family, name)``, as
        ``NftTools.ruleset`` reads it); the libnftables JSON commands that
        remove every pick (``nft_json.deletion``) go in one atomic ``nft -j
        -f -`` transaction, whose actions are the picks' texts.  The reading
        is ``(tables, None)``, or ``(None, why)`` when nft cannot list the
        ruleset (nothing removed: :meth:`removal_notes`).  A failure says
        that no part of the transaction was applied."""
        if not self.available():
            return None
        tools = self.nft

        def read():
            try:
                return tools.ruleset(), None
            except MasqError as e:
                return None, e.msg

        def plan(reading):
            tables = reading[0]
            picked, commands = _nothing_applied(_picks, match, tables)
            if not picked:
                return Plan()
            return Plan([_PicksStep('nft', [text for text, _what in picked],
                                    lambda: _nothing_applied(tools.load, commands))])

        return read, plan

    def removal_notes(self, reading):
        unreadable = reading[1]
        return ['%s; nftables tables not checked.' % unreadable.rstrip('.')] if unreadable else []

    def missing_text(self):
        return 'nft not found; no nftables table checked.'

    @classmethod
    def after_run(cls, tool, argv, data, results, run):
        """The ruleset with the runs' transactions applied (``ruleset_text.after_run``)."""
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import ruleset_text  # after mode only: loaded by it alone
        return ruleset_text.after_run(tool, argv, data, results, run)

    @classmethod
    def after_write(cls, tool, argv, data, run):
        """A daemon's removal as a transaction to apply in memory (``ruleset_text.after_write``)."""
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import ruleset_text  # after mode only: loaded by it alone
        return ruleset_text.after_write(tool, argv, data)

    def audit_read(self, view, family):
        """The whole ruleset: every nft table, not only ours."""
        if family is not None:
            return []
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.audit import (  # the audit's reader: loaded by an audit only
            read_ruleset,
        )
        return read_ruleset(view, self.name, self.nft)

    @classmethod
    def audit_words(cls, chain, advice):
        return {'ours': 'nftables (%s)' % table_label(table_name(chain))}

    @staticmethod
    def fleet_report_words(chain):
        return {'by_hand': 'nft delete %s' % table_label(table_name(chain))}

    @staticmethod
    def rules_in_place(result, policy):
        """The rules of our chain that can match each family."""
        # Start-up cost: the table's spelling is loaded only by a run that writes metrics.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.rules import Desired  # pylint: disable=import-outside-toplevel

        out = {}
        for served in Desired(policy).rule_families:
            for family in policy.families() if served is None else (served,):
                out[family] = out.get(family, 0) + 1
        return out

    def report(self, reading, plan, policy, state, result):
        st = self.state(reading)
        result['commands'].extend(self._nft.commands if self._nft is not None else ())
        result['nft_version'] = self._nft.version if self._nft is not None else None
        nft = st.plan
        out = {'table': table_label(st.name), 'managed': reading.selected == self.name,
               'read': st.read, 'exists_before': st.table is not None,
               'changed': bool(nft is not None and nft.changed), 'before': None, 'after': None,
               'transaction': None, 'drift': None}
        late = []
        if nft is not None:
            if nft.changed:
                # The listings only when they differ: a table in sync is the
                # policy's, and 20,000 set elements are not sent back every run.
                out['before'], out['after'] = nft.before, nft.after
                out['transaction'] = self.nft.batch(nft.commands)
                if nft.managed and nft.desired is not None:
                    # Which rules and set elements the rewrite puts back or takes out (start-up
                    # cost: the planner is loaded only where nft ran).
                    from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.table import (  # pylint: disable=import-outside-toplevel
                        table_drift,
                    )

                    out['drift'] = table_drift(nft.table, nft.desired)
            if nft.others:
                # Start-up cost: the table's spelling is loaded only where nft ran.
                from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.rules import (  # pylint: disable=import-outside-toplevel
                    render_live,
                )

                out['others'] = [{'table': table_label(name), 'before': render_live(table)} for name, table in nft.others]
            if nft.note:
                out['note'] = nft.note
                late.append('nftables: %s' % nft.note)
        elif st.note:
            out['note'] = st.note
        result['nftables'] = out
        return late

    # -- the consumers' words (backend.Backend) ----------------------------------

    @staticmethod
    def holds_policy(result):
        return bool((result.get('nftables') or {}).get('managed'))

    @staticmethod
    def diff_text(result, which):
        """Our table as ``nft list table`` shows it; before the run, also ours under other chain names."""
        text = ''
        nft = result.get('nftables') or {}
        body = nft.get(which)
        if which == 'after' and not nft.get('managed'):
            body = None
        if nft.get('read') or body:
            text += '# nft list %s\n%s' % (nft.get('table'), body or '')
        if which == 'before':
            # Our tables under another chain name: there before, deleted by this run.
            for other in nft.get('others') or []:
                text += '# nft list %s (ours under another chain name)\n%s' % (other['table'], other['before'] or '')
        return text

    @staticmethod
    def msg_parts(result, check_mode, present, elsewhere):
        """``nftables table inet x written`` / ``... in place``; ``old nftables table ... removed`` later."""
        # Start-up cost: the msg's words are loaded only by a module run (never by the resync).
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.result_words import did  # pylint: disable=import-outside-toplevel

        changed, steady = [], []
        nft = result.get('nftables') or {}
        table = 'nftables ' + (nft.get('table') or 'table')
        if nft.get('changed'):
            if nft.get('managed') and present:
                changed.append(did(check_mode, table, 'written', 'write'))
            else:
                changed.append(did(check_mode, table, 'removed', 'remove'))
        elif nft.get('managed'):
            steady.append('%s in place' % table)
        later = [did(check_mode, 'old nftables %s' % other.get('table'), 'removed', 'remove')
                 for other in nft.get('others') or []]
        return changed, steady, later

    @staticmethod
    def log_lines(result):
        """The ``nft -j -f -`` transaction."""
        transaction = (result.get('nftables') or {}).get('transaction')
        return ['nft -j -f - input:\n%s' % transaction] if transaction else []

    @staticmethod
    def in_sync_text(result):
        return ('in sync: %s (nft %s; %s); nothing written.'
                % (result['nftables']['table'], result['nft_version'], result['selected_backend_reason']))

    @staticmethod
    def drift_words(result, action, said):
        if not action.startswith('nftables: rewrite ') or 'nftables' in said:
            return ''
        said.add('nftables')
        found = (result.get('nftables') or {}).get('drift')
        if not found:
            return ''
        # Start-up cost: the drift's words are loaded only by a run that repaired something.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import drift as rule_drift  # pylint: disable=import-outside-toplevel

        words = []
        if rule_drift.describe(found.get('rules') or {}):
            words.append('chain %s: %s' % (CHAIN, rule_drift.describe(found['rules'])))
        for name, change in sorted((found.get('sets') or {}).items()):
            words.append('set %s: %s' % (name, rule_drift.describe(change)))
        return '; '.join(words)

    @staticmethod
    def drift_report(result):
        """'missing' when our table did not exist before the run."""
        nft = result.get('nftables') or {}
        found = (nft.get('drift') if isinstance(nft, dict) else None) or {}
        # Start-up cost: the drift's words are loaded only by a run that reports drift.
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import drift as rule_drift  # pylint: disable=import-outside-toplevel

        words = []
        if rule_drift.describe(found.get('rules') or {}):
            words.append('nftables chain %s: %s' % (CHAIN, rule_drift.describe(found['rules'])))
        for name, change in sorted((found.get('sets') or {}).items()):
            words.append('nftables set %s: %s' % (name, rule_drift.describe(change)))
        return 'missing' if not nft.get('exists_before') else 'drifted', words
