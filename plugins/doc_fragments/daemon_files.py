# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


class ModuleDocFragment(object):
    """The options docker_ip_masq, flannel_ip_masq and kubelet_nonmasq share
    (their argument spec: ``_daemons.base.COMMON_SPEC``); ``BACKUPS``: the
    backup options every daemon module has, cni_ip_masq too."""

    DOCUMENTATION = r'''
options:
  unit_dirs:
    description:
      - Directories searched for the unit and its C(<unit>.d/*.conf) drop-ins, highest priority first, as
        systemd does.
    type: list
    elements: path
    default: [/etc/systemd/system, /run/systemd/system, /usr/local/lib/systemd/system, /lib/systemd/system, /usr/lib/systemd/system]
  root:
    description:
      - Look every file up below this directory, as C(systemctl --root) does (an image, a test tree).
        Commands (C(iptables-save), the Docker CLI, C(kubelet --version)) still run on the node.
    type: path
    default: /
notes:
  - Every file a run changes is changed together or not at all; a failure leaves every file as it was and
    names the file that could not be written. Files are replaced through C(AnsibleModule.atomic_move), which
    keeps their SELinux context, owner and mode.
  - A file that is immutable or append-only (C(chattr +i), C(chattr +a)), or in a directory that is, is refused
    before anything is copied or staged. A run that fails leaves no timestamped copy and no change in O(backup_dir)
    behind.
  - When a file already replaced cannot be put back after a later one failed, the task fails with C(changed=true),
    names each file left edited (C(left_edited)) and the copy of its earlier content to restore it from, with the
    command (C(restore)).
  - Each run removes the temporary files (C(.NAME.<12 hex digits>.ipmasq-tmp)) that a run stopped between staging
    and renaming left beside the files it reads or writes, once they are older than 10 minutes.
'''

    BACKUPS = r'''
options:
  backup_dir:
    description:
      - Where the original of each edited file is kept (C(<backup_dir>/<path>)), with a small JSON record next
        to it, so that O(state=absent) can restore it byte for byte.
    type: path
    default: /var/lib/ipmasq-agent/backup
  backup:
    description:
      - Also copy each file beside itself with a timestamp before it is changed (as C(backup=yes) does in
        ansible.builtin modules).
    type: bool
    default: true
'''
