# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The node's ``nft``: listings and transactions in libnftables JSON on
stdin (``nft -j -f -``; ``nft_json.py`` parses what it prints), argv lists
through the injected ``run``, never a shell.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import (
    NftTable,
    documents,
    parse_nft,
    version as nft_version,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.names import FAMILY, table_label

# What nft says when the table asked for does not exist.
_NO_TABLE = 'No such file or directory'


def missing_nft():
    return 'nft was not found on the node; install the nftables package.'


class NftTools:
    """The node's ``nft``: listings and transactions in libnftables JSON on
    stdin (``nft -j -f -``).  ``commands`` lists what was (or, for a
    transaction in check mode, would be) run."""

    def __init__(self, run, find):
        self._run = run
        self.nft = find('nft')
        self.available = bool(self.nft)
        self.commands = []
        self.version = None

    def argv(self):
        return [self.nft, '-j', '-f', '-']

    def batch(self, commands):
        """The JSON text of a transaction (or listing)."""
        import json  # pylint: disable=import-outside-toplevel

        return json.dumps({'nftables': commands}, separators=(',', ':'))

    def _fail(self, argv, rc, out, err, what):
        raise MasqError('%s failed (rc=%d): %s' % (what, rc, (err or out).strip() or 'no message (nft crashed?)'),
                        cmd=' '.join(argv), rc=rc, stdout=out, stderr=err)

    def listing(self, name):
        """Our table (``nft_json.NftTable``), or None when it does not exist."""
        argv = self.argv()
        self.commands.append(' '.join(argv) + '  # list %s' % table_label(name))
        rc, out, err = self._run(argv, self.batch([{'list': {'table': {'family': FAMILY, 'name': name}}}]))
        if rc != 0:
            if _NO_TABLE not in (err or ''):
                self._fail(argv, rc, out, err, 'nft (listing %s)' % table_label(name))
            return None
        try:
            docs = documents(out, 'nft -j')
        except MasqError:
            return self._unreadable(name)
        if not docs:
            raise MasqError('nft printed nothing when listing %s.' % table_label(name))
        self.version = nft_version(docs[0]) or self.version
        return parse_nft(docs[0]).get((FAMILY, name))

    def table_names(self):
        """The names of every table of our family (``nft -j list tables``),
        for when the kernel cannot be asked over nfnetlink."""
        argv = [self.nft, '-j', 'list', 'tables', FAMILY]
        self.commands.append(' '.join(argv))
        rc, out, err = self._run(argv)
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft (listing the %s tables)' % FAMILY)
        return [name for family, name in parse_nft(out or '{}', what=' '.join(argv)) if family == FAMILY]

    def _unreadable(self, name):
        """The table exists but nft's JSON of it is broken (nft 1.0.6 prints
        the flags of a dormant table as garbage): a table to replace, ours
        when its text listing carries our comment."""
        argv = [self.nft, 'list', 'table', FAMILY, name]
        self.commands.append(' '.join(argv))
        rc, out, err = self._run(argv)
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft (listing %s)' % table_label(name))
        table = NftTable(FAMILY, name)
        table.unreadable = out
        return table

    def query(self, listings, what):
        """Run ``listings`` (libnftables JSON ``list`` commands) in one nft
        run; returns the JSON documents, one per command.  Raises MasqError
        when nft fails (a listed table that does not exist, too).  List one
        thing per run: nft 1.0 fills its cache for the first listing of a
        run only, and a second one then misses what is outside it."""
        argv = self.argv()
        self.commands.append(' '.join(argv) + '  # list %s' % what)
        rc, out, err = self._run(argv, self.batch(listings))
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft (listing %s)' % what)
        docs = documents(out, 'nft -j')
        if docs:
            self.version = nft_version(docs[0]) or self.version
        return docs

    def ruleset(self):
        """The whole ruleset: ``nft_json.parse_nft`` tables by ``(family, name)``."""
        docs = self.query([{'list': {'ruleset': None}}], 'ruleset')
        return parse_nft(docs[0] if docs else {})

    def list_ruleset(self):
        """The whole ruleset, as ``nft -j list ruleset`` prints it: an argv
        and no input, what a caller that only reads may run (the SNAT audit's
        guard allows nothing else).  ``nft_json.parse_nft`` tables by
        ``(family, name)``; MasqError when nft fails (``rc`` in its details)."""
        argv = [self.nft, '-j', 'list', 'ruleset']
        what = ' '.join(argv)
        self.commands.append(what)
        rc, out, err = self._run(argv)
        if rc != 0:
            self._fail(argv, rc, out, err, what)
        return parse_nft(out or '{}', what='nft -j list ruleset')

    def load(self, commands):
        """One atomic transaction."""
        argv = self.argv()
        rc, out, err = self._run(argv, self.batch(commands))
        if rc != 0:
            self._fail(argv, rc, out, err, 'nft -j -f - (the transaction)')
