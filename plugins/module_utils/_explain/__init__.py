# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Explain one flow's SNAT: which rule of which owner decides the source a
packet leaves with, and why (the ``snat_explain`` module).

* ``flow.py``: the flow the user asks about, checked (:func:`flow.parse`);
* ``node.py``: reading the node, once and only reading, through the
  audit's reader (``_core.registry.audit_view.View``: every registered backend's
  ``audit_read``), and the node's own addresses from /proc;
* ``answer.py``: the kernel's order of the nat postrouting base chains and
  the answer (:func:`answer.explain`), pure.

Each backend evaluates its own rules (``_core/iptables_backend/explain.py``,
``_core/nftables_backend/explain.py``: a ``_core.engine.trace.Program`` per
base chain, handed over with the audit's findings); a match a backend
cannot evaluate makes the answer ``unknown``, naming it.

This package's ``__init__`` imports nothing.  Standard library only: these
files run on managed nodes.
"""
