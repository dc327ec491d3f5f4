# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The ``CNI-<hash>`` chains the CNI editor (``cni.py``) emptied: it keeps
them while their containers run (the plugins' DEL needs them), records
them (network, container id, family) in
``<backup_dir>/cni-emptied-chains.json``, and a later run deletes a
recorded chain that is still there, empty and unreferenced, once its
container is gone: the runtime's own records no longer list its id.

Those records, below the module's ``root``:

- libcni's cache ``<cache_dir>/results/<network>-<id>-<ifname>``, which
  containerd, CRI-O, podman and nerdctl keep for every container they
  added (``cache_dir``: ``/var/lib/cni``);
- host-local's leases, ``<dataDir>/<network>/<address>``, whose first line
  is the container id (``dataDir`` of the network file's ``ipam``,
  ``/var/lib/cni/networks`` by default).

A container is gone when at least one of them exists on the node and none
lists it; where neither exists, it cannot be known gone and its chain
stays.  A chain the plugin's DEL deleted leaves the record.  This costs no
tool call: the editor reads the rules on every run anyway; the record is one
small file, read where there are networks to clean.

Standard library only: this file runs on managed nodes.
"""

import json
import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import atomic_write
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_names import chain_name, comment_of
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_network import HOST_LOCAL_DIR

# The record, in the backup store.
CHAINS_RECORD = 'cni-emptied-chains.json'


class EmptiedChains:
    """The record of the ``CNI-<hash>`` chains we emptied
    (``<backup_dir>/cni-emptied-chains.json``: ``[{family, chain, network,
    container}]``), and whether each one's container is gone (the runtime's
    records, below ``root``: module docstring)."""

    def __init__(self, files, backups, cache_dir, ipam_dirs):
        self.files = files
        self.path = os.path.join(files.real(backups.dir), CHAINS_RECORD)
        self.cache_dir = cache_dir
        self.ipam_dirs = ipam_dirs      # network name -> host-local dataDirs of its file (Network.data_dirs)
        self.known = self._load()
        self.after = {}                 # family -> the entries to keep, as the last read found them

    def _load(self):
        try:
            with open(self.path) as f:
                data = json.load(f)
        except (IOError, OSError, ValueError):
            return []
        return [e for e in data if isinstance(e, dict) and isinstance(e.get('chain'), str)
                and e.get('family') in (4, 6)] if isinstance(data, list) else []

    def gone(self, family):
        """The recorded chains of ``family`` whose containers are gone."""
        return set(e['chain'] for e in self.known if e['family'] == family and self._gone(e))

    def _gone(self, entry):
        network, container = entry.get('network'), entry.get('container')
        if not isinstance(network, str) or not isinstance(container, str):
            return False
        sources = 0
        results = self.files.real(self.cache_dir.rstrip('/') + '/results')
        if os.path.isdir(results):
            sources += 1
            if any(n.startswith('%s-%s-' % (network, container)) for n in os.listdir(results)):
                return False
        for data_dir in self.ipam_dirs.get(network) or [HOST_LOCAL_DIR]:
            leases = self.files.real(data_dir.rstrip('/') + '/' + network)
            if not os.path.isdir(leases):
                continue
            sources += 1
            for name in os.listdir(leases):
                try:
                    with open(os.path.join(leases, name)) as f:
                        if f.readline().strip() == container:
                            return False
                except (IOError, OSError, UnicodeDecodeError):
                    continue
        return sources > 0

    def seen(self, family, table, rules, chains):
        """What the read of ``family`` found: the recorded chains still there
        and not removed now, and the chains ``rules`` empty now."""
        keep = dict((e['chain'], e) for e in self.known
                    if e['family'] == family and e['chain'] in table.chains and e['chain'] not in chains)
        for rule in rules:
            owner = comment_of(rule.comment)
            if owner is not None and chain_name(*owner) in table.chains:
                keep.setdefault(chain_name(*owner), {'family': family, 'chain': chain_name(*owner),
                                                     'network': owner[0], 'container': owner[1]})
        self.after[family] = [keep[c] for c in sorted(keep)]

    def save(self):
        """Write the record as the last reads found it (no file when empty)."""
        entries = [e for e in self.known if e['family'] not in self.after]
        for family in sorted(self.after):
            entries.extend(self.after[family])
        entries.sort(key=lambda e: (e['family'], e['chain']))
        if entries == sorted(self.known, key=lambda e: (e['family'], e['chain'])):
            return
        if entries:
            atomic_write(self.path, json.dumps(entries, indent=2, sort_keys=True) + '\n', 0o600)
        elif os.path.lexists(self.path):
            os.unlink(self.path)
