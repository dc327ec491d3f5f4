# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""containers.podman's podman connection with pipelining, for the Molecule scenarios only.

tests/molecule.sh puts this directory on ANSIBLE_CONNECTION_PLUGINS and sets
ANSIBLE_PIPELINING, so that the connection Molecule's podman driver names
(``podman``) is this one. The collection's own connection runs each module
with five ``podman exec`` (the home directory, a temporary directory, chmod,
the module, rm) and says it cannot pipeline: it starts ``podman exec`` without
``--interactive``, so the module sent on stdin never arrives. With
``--interactive`` one ``podman exec`` per module is enough (20 ``command``
tasks on a loaded 2-core machine: 55-61 s and 12 s of CPU without, 23-27 s
and 3.5 s of CPU with). Nothing a scenario proves changes: the same modules
run on the same nodes; files still go through the container's mount.
"""

from ansible_collections.containers.podman.plugins.connection import podman as _upstream

DOCUMENTATION = _upstream.DOCUMENTATION


class Connection(_upstream.Connection):
    has_pipelining = True

    def _podman(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        if in_data is not None and isinstance(cmd, list) and cmd[:1] == ['exec']:
            cmd = ['exec', '--interactive'] + cmd[1:]
        return super()._podman(cmd, cmd_args, in_data, use_container_id)
