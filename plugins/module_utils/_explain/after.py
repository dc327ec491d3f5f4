# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The explanation "after the role": the node's nat listings as they will
be once this host's policy is applied, without writing anything.

The policy part of the role (``ip_masq_node``'s ``chain``: masq_chain's
options, typed and checked as that module checks them) runs through the
same core as a real run (``_masq_chain.apply_checked``), in check mode: it
only reads and plans.  Its plan is what the real run would write: per
family the ``iptables-restore --noflush`` input, and for nftables the
``nft -j -f -`` transaction.  :class:`Projection` has each registered
backend apply them to its listings the explanation reads, in memory, each
time they are read (``Backend.after_run``): the explanation then reads the
node as the role leaves it.  ``_snat_explain.project`` makes the run.

Only the writes a plan makes are applied; one this file cannot apply is an
error naming it, never a guess.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends


class Projection:
    """``run`` as the explanation's reads see the node after the role: each
    registered backend answers its own commands with the policy runs
    ``results`` (masq_chain results, check mode) applied to its listings
    (``Backend.after_run``); another command runs as it is when it sends
    nothing on stdin.  A write is refused: the explanation only reads."""

    def __init__(self, run, results=()):
        self.run = run
        self.results = list(results)

    def __call__(self, argv, data=None):
        tool = argv[0].rsplit('/', 1)[-1] if argv else ''
        for backend in backends.REGISTRY:
            answer = backend.after_run(tool, argv, data, self.results, self.run)
            if answer is not None:
                return answer
        if data is not None:
            raise MasqError('internal error: after mode refused to run %r (it only reads).' % (argv,))
        return self.run(argv)


def policy_writes(projection, result):
    """Add a policy run's ``result`` (``_masq_chain.apply_checked`` in check
    mode) to ``projection``; notes on what it would write that the answer
    does not show."""
    projection.results.append(result)
    return [note for backend in backends.REGISTRY for note in backend.after_notes(result)]
