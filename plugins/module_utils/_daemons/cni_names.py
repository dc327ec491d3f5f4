# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The names and comments the CNI plugins give the rules of ``"ipMasq":
true``, and where the runtimes keep their networks and containers: what the
editor (``cni.py``, ``cni_network.py``, ``cni_chains.py``) selects by and
the descriptor (``cni_daemon.py``) names.  A file of its own, imported by
both, so that the editor never imports the descriptor that imports it.

What the plugins write, per container (``pkg/ip/ipmasq_linux.go``; seen
with Debian 12's containernetworking-plugins 1.1.1, IPv4 and IPv6):

- iptables: a chain ``CNI-`` + the first 24 hex digits of
  SHA-512(network name + container id) in the nat table, holding ``-d
  <subnet> -j ACCEPT`` and ``! -d 224.0.0.0/4 -j MASQUERADE`` (IPv6: ``!
  -d ff00::/8``), reached by ``-A POSTROUTING -s <pod address> -j
  <chain>``; every rule commented ``name: "<network>" id: "<container
  id>"``.  DEL deletes the jump, then flushes and deletes the chain.
- nftables (``"ipMasqBackend": "nftables"``, plugins 1.5 and later; Debian
  12's plugins do not have it): table ``inet cni_plugins_masquerade``,
  base chain ``postrouting`` (multicast returns, then ``goto
  masq_checks``), and per container in ``masq_checks`` ``ip saddr ==
  <pod> ip daddr != <subnet> masquerade`` commented ``<16 hex digits of
  SHA-512(network)>-<16 of SHA-512(ifname:container id)>, net: <network>,
  if: <ifname>, id: <container id>``.

Standard library only: this file runs on managed nodes.
"""

import hashlib
import re

CNI_CONF_DIR = '/etc/cni/net.d'
# libcni's cache (results/<network>-<container id>-<ifname>), where the
# runtimes (containerd, CRI-O, podman, nerdctl) record their containers.
CNI_CACHE_DIR = '/var/lib/cni'
# The file names libcni loads a network from (libcni.ConfFiles).
CONF_SUFFIXES = ('.conf', '.conflist', '.json')
# The plugins whose "ipMasq" masquerades a network's traffic.
MASQ_PLUGINS = ('bridge', 'ptp')
MASQ_KEY = 'ipMasq'

CHAIN_PREFIX = 'CNI-'
CHAIN_HASH_DIGITS = 24
# utils.FormatComment: name: %q id: %q (network names and container ids hold no quotes).
_COMMENT = re.compile(r'^name: "([^"\\]*)" id: "([^"\\]*)"$')

NFT_TABLE = ('inet', 'cni_plugins_masquerade')
NFT_CHAIN = 'masq_checks'
NFT_HASH_DIGITS = 16


def _sha512(text):
    return hashlib.sha512(text.encode('utf-8', 'surrogateescape')).hexdigest()


def chain_name(network, container):
    """The iptables chain the plugins give one container's masquerading."""
    return CHAIN_PREFIX + _sha512(network + container)[:CHAIN_HASH_DIGITS]


def comment_of(comment):
    """``(network, container id)`` of a comment the plugins wrote, or None."""
    m = _COMMENT.match(comment or '')
    return (m.group(1), m.group(2)) if m else None


def nft_comment_prefix(network):
    """How the comment of every nftables masquerade rule of ``network`` starts."""
    return _sha512(network)[:NFT_HASH_DIGITS] + '-'
