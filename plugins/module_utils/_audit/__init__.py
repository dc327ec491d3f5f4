# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Read-only audit of every source of SNAT on a node.

Lists each MASQUERADE and SNAT rule in the nat tables (iptables, nf_tables
and legacy backends) and in nftables tables with a ``type nat hook
postrouting`` chain, follows jumps and gotos from the postrouting hook to
tell which rules can act on traffic, says who wrote each one (the
ip-masq-agent chain, Docker, flannel, kube-proxy, a CNI plugin, netavark,
libvirt, or unknown) and whether it is allowed next to ours.

One file per concern:

* ``node.py``: reads the node once, through the registered backends
  (``Backend.audit_read``), and only reads (:func:`audit`,
  :func:`read_only`): each backend returns what it found as neutral
  findings (``_core/engine/backend.py``: ``AuditFinding``), which the judge and
  the report read without knowing the technology they came from;
* ``_core/iptables_backend/audit.py``, ``_core/nftables_backend/audit.py``: the backends' readers (what their
  ``audit_read`` calls) and the rule interpreters, over the tables as the
  core's readers parsed them (``iptables_save``, ``nft_json``), and the
  audit's words for ours there;
* ``_core/engine/conds.py``: what a rule requires of a packet; ``_core/engine/walk.py``: which rules
  the postrouting hook reaches;
* ``owners.py``: who wrote a rule, decided after every backend has read
  (the readers hand over their clues, ``walk.Clues``, and import no owner:
  our daemons' descriptors come from their own files in ``_daemons/``,
  whose editors use the backends); ``allow.py``: the ``allow`` option;
* ``judge.py``: the verdict (:func:`analyse`); ``report.py``: the result's
  words (:func:`summary`, :func:`offender_lines`).

Each is imported from its own module (``_audit.node.audit``,
``_audit.report.offender_lines``, ...): this package's ``__init__`` imports
nothing, so that the controller's check of the role's ``allow`` list
(``_audit.allow``) does not load the node readers and every backend.

Standard library only: these files run on managed nodes.
"""
