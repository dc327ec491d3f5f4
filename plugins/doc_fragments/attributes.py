# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


class ModuleDocFragment(object):
    """The ``attributes`` of the collection's modules, one variant per kind of module.

    A module extends exactly one variant, which sets all three attributes (check_mode,
    diff_mode, platform); the module's own ``attributes:`` only overrides a description
    where it says more than the variant (ansible-core merges the module's keys over the
    fragment's, attribute by attribute).
    """

    # A module that changes the node: check mode and diff mode in full.
    DOCUMENTATION = r'''
attributes:
  check_mode:
    support: full
    description: Reads the node and reports what would change; changes nothing.
  diff_mode:
    support: full
    description: Shows what changes, before and after.
  platform:
    support: full
    platforms: posix
    description: Any POSIX node with Python.
'''

    # docker_ip_masq, flannel_ip_masq, kubelet_nonmasq: edit a daemon's files (and may remove its rules).
    DAEMON = r'''
attributes:
  check_mode:
    support: full
    description: Reads everything and reports what would change; writes no file and runs no C(iptables-restore) and no
      nft transaction.
  diff_mode:
    support: full
    description: Shows every file edited, before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with systemd.
'''

    # A module that only reads the node (snat_sources).
    READ_ONLY = r'''
attributes:
  check_mode:
    support: full
    description: The module only reads; it runs the same commands and returns the same result in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Any POSIX node with Python.
'''
