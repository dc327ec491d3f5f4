# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""kubelet, as the registry (``registry.py``) knows it: :data:`DAEMON`.
Kubelets older than 1.24 add a masquerade rule of their own in a ``KUBE-``
chain (the audit tells it as kube-proxy's: no owner of its own); the editor
(``kubelet.py``) gives them ``--non-masquerade-cidr=0.0.0.0/0``.  The editor
is imported only when a run needs it.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import Daemon


def editor():
    """kubelet's editor: ``(options, sync)``."""
    # Start-up cost: the editor loads only when a run edits kubelet.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.kubelet import KUBELET_OPTIONS, kubelet_sync  # pylint: disable=import-outside-toplevel
    return KUBELET_OPTIONS, kubelet_sync


DAEMON = Daemon(
    'kubelet',
    editor=editor,
    service='kubelet.service',
    module='kubelet_nonmasq',
    default='report',
    description=('For kubelets older than 1.24: V(auto) adds --non-masquerade-cidr=0.0.0.0/0 where kubelet is '
                 'installed; V(manage) the same, and fails where kubelet is not installed; V(report) only reports '
                 'it; V(skip) does nothing. V(set), the former spelling of V(auto), is deprecated.'),
    doc='``--non-masquerade-cidr=0.0.0.0/0`` for kubelets older than 1.24 (their own ``MASQUERADE`` rule)',
    report={'mode': 'report'},
    deprecated={'set': 'auto'},
)
