# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The SNAT explanation "after the role" (``_explain/after.py``), the
nftables part: an ``nft -j list ruleset`` listing with a policy run's
``nft -j -f -`` transaction applied in memory (:class:`Ruleset`), and
:func:`after_run`, what ``Nftables.after_run`` answers; a daemon's
clean-up transaction is recorded the same way (:func:`after_write`).  Loaded only in
after mode.

Standard library only: this file runs on managed nodes.
"""
import json

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


def _where(obj):
    return (obj.get('family'), obj.get('table', obj.get('name')))


class Ruleset:
    """An ``nft -j list ruleset`` listing: its items, in order."""

    def __init__(self, text):
        try:
            data = json.loads(text) if text.strip() else {'nftables': []}
        except ValueError as e:
            raise MasqError('after mode: nft -j list ruleset printed something that is not JSON: %s' % e)
        self.items = list(data.get('nftables', [])) if isinstance(data, dict) else []
        self.handle = max([0] + [obj.get('handle', 0) for item in self.items for obj in item.values()
                                 if isinstance(obj, dict) and isinstance(obj.get('handle'), int)])

    def text(self):
        return json.dumps({'nftables': self.items})

    def _drop(self, keep):
        self.items = [item for item in self.items if keep(*next(iter(item.items())))]

    def load(self, transaction):
        """Apply ``transaction`` (``nft -j -f -`` input, text or decoded)."""
        data = json.loads(transaction) if isinstance(transaction, str) else transaction
        for command in data.get('nftables', []):
            verb, what = next(iter(command.items()))
            kind, obj = next(iter(what.items()))
            where = _where(obj)
            if verb == 'add' and kind == 'table':
                if not any(k == 'table' and _where(o) == where for item in self.items for k, o in item.items()):
                    self.items.append({'table': dict(obj)})
            elif verb == 'delete' and kind == 'table':
                self._drop(lambda k, o, w=where: not isinstance(o, dict) or _where(o) != w)
            elif verb == 'add' and kind in ('set', 'chain', 'rule'):
                obj = dict(obj)
                if kind == 'rule':
                    self.handle += 1
                    obj['handle'] = self.handle
                self.items.append({kind: obj})
            elif verb == 'add' and kind == 'element':
                for item in self.items:
                    found = item.get('set')
                    if found is not None and _where(found) == where and found.get('name') == obj.get('name'):
                        found['elem'] = list(found.get('elem') or []) + list(obj.get('elem') or [])
            elif verb == 'delete' and kind == 'rule':
                self._drop(lambda k, o, w=where, h=obj.get('handle'): not (k == 'rule' and _where(o) == w
                                                                           and o.get('handle') == h))
            elif verb in ('flush', 'delete') and kind == 'chain':
                name = obj.get('name')
                self._drop(lambda k, o, w=where, n=name, v=verb: not (
                    _where(o) == w and ((k == 'rule' and o.get('chain') == n)
                                        or (v == 'delete' and k == 'chain' and o.get('name') == n))))
            else:
                raise MasqError('after mode cannot apply the nft command %s.' % json.dumps(command))


def _lists_only(data):
    """Whether an ``nft -j -f -`` batch holds ``list`` commands only."""
    try:
        commands = json.loads(data or '').get('nftables')
    except (ValueError, AttributeError):
        return False
    return bool(commands) and all(isinstance(c, dict) and list(c) == ['list'] for c in commands)


def after_run(tool, argv, data, results, run):
    """``(rc, out, err)`` of an ``nft`` command as the node will answer once
    the policy runs ``results`` are written; None for another tool.  A
    batch that writes is refused."""
    if tool != 'nft':
        return None
    if ('-f' in argv or data is not None) and not _lists_only(data):
        raise MasqError('internal error: after mode refused to run %r (it only reads).' % (argv,))
    rc, out, err = run(argv) if data is None else run(argv, data)
    transactions = [(r.get('nftables') or {}).get('transaction') for r in results]
    transactions = [t for t in transactions if t]
    if rc == 0 and list(argv[1:]) == ['-j', 'list', 'ruleset'] and transactions:
        ruleset = Ruleset(out)
        for transaction in transactions:
            ruleset.load(transaction)
        out = ruleset.text()
    return rc, out, err


def after_write(tool, argv, data):
    """A daemon's removal, an ``nft -j -f -`` transaction (``data``), as a
    result whose transaction :func:`after_run` applies; None for another
    command, or a batch that only lists."""
    if tool != 'nft' or data is None or '-f' not in argv or _lists_only(data):
        return None
    return {'nftables': {'transaction': data}}
