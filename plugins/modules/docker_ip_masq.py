#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: docker_ip_masq
short_description: Stop Docker from masquerading its default bridge
version_added: 1.0.0
description:
  - >-
    Sets C("ip-masq": false) in Docker's C(daemon.json) so that Docker adds no C(MASQUERADE) rule for its
    default bridge (C(docker0)), leaving SNAT to the C(IP-MASQ-AGENT) chain. Every other key of the file and
    its layout are kept; the file is edited as text, not rewritten.
  - If C(--ip-masq) is on the C(dockerd) command line (the unit's C(ExecStart=), a drop-in, or a variable from
    an C(EnvironmentFile=) such as C(DOCKER_OPTS) in C(/etc/default/docker) or C(OPTIONS) in
    C(/etc/sysconfig/docker)), Docker refuses to start when C(daemon.json) also has the setting. The module
    then sets the flag to C(--ip-masq=false) where it is written and makes sure C(daemon.json) has no
    C(ip-masq) key.
  - A flag in a file generated at run time (below C(/run), for example flannel's C(mk-docker-opts.sh) output
    in C(/run/flannel/docker)) is not edited; a C(true) there is reported as a warning.
  - A malformed C(daemon.json) (comments, trailing commas, not an object) is an error that names the file and
    the position; nothing is changed. An empty file counts as C({}).
  - Before the first edit of a file its original is kept in O(backup_dir); O(state=absent) puts it back byte
    for byte. Docker needs a restart to apply any change (RV(restart_required)); the module never restarts it.
  - With O(remove_stale_rules=true), after Docker has restarted with C(ip-masq) off, its default-bridge rule
    C(-s <subnet> ! -o docker0 -j MASQUERADE) (and the hairpin rule C(-o docker0 -m addrtype --src-type LOCAL
    -j MASQUERADE)) is deleted from C(POSTROUTING) if it survived the restart, IPv4 and IPv6, one
    C(iptables-restore --noflush) transaction per family. Nothing else is touched.
  - >-
    With Docker's nftables firewall backend (C("firewall-backend": "nftables")), O(remove_stale_rules=true) also
    deletes the default bridge's masquerade rule from the nft tables C(ip docker-bridges) and
    C(ip6 docker-bridges) - C(oifname != "docker0" ip saddr <subnet> counter masquerade comment "MASQUERADE") in
    chain C(nat-postrouting-out__docker0) (bridge and subnets as for iptables) - by rule handle, both families in
    one atomic C(nft -j -f -) transaction (since 1.1.0). Docker's chains, verdict maps and every other rule stay,
    also the hairpin rule C(fib saddr type local counter masquerade comment "MASQUERADE FROM HOST"), which Docker
    writes whenever its userland proxy is off, whatever C(ip-masq) says, and which rewrites only the host's own
    connections into the bridge.
  - With O(report_networks=true), user-defined bridge networks that still masquerade are listed with what to
    do; Docker cannot change that on an existing network.
  - Does nothing (and reports RV(installed=false)) when Docker is not installed.
extends_documentation_fragment:
  - ipmasq.agent.daemon_files
  - ipmasq.agent.daemon_files.backups
  - ipmasq.agent.attributes.daemon
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  platform:
    description: Linux with systemd (the unit is looked up in O(unit_dirs)); C(daemon.json) is also handled without it.
options:
  state:
    description:
      - V(present) switches masquerading of the default bridge off.
      - V(absent) puts back every file this module edited, from the originals in O(backup_dir). A file changed by
        someone else since keeps those changes; in C(daemon.json) only the C(ip-masq) key is reverted, other
        files are left alone with a warning.
    type: str
    choices: [present, absent]
    default: present
  daemon_json:
    description:
      - Docker's configuration file. A C(--config-file) on the C(dockerd) command line takes precedence.
    type: path
    default: /etc/docker/daemon.json
  unit_name:
    description: Docker's systemd unit.
    type: str
    default: docker.service
  env_files:
    description:
      - Extra environment files whose every assignment is searched for C(--ip-masq), for options that reach
        C(dockerd) through a wrapper script rather than the unit. Files named by the unit's C(EnvironmentFile=) are
        always read (only the variables C(ExecStart=) uses).
    type: list
    elements: path
    default: []
  remove_stale_rules:
    description:
      - Delete Docker's default-bridge C(MASQUERADE) rule(s) from C(POSTROUTING) when Docker no longer masquerades
        the default bridge but the rule is still there; with Docker's nftables firewall backend, its masquerade rule
        in C(ip docker-bridges) and C(ip6 docker-bridges) (chain C(nat-postrouting-out__<bridge>)) too (since 1.1.0).
      - The bridge and its subnets come from C(docker network inspect bridge) when the Docker CLI works, else
        from O(bridge_name) and O(bridge_cidrs), else from C(daemon.json) (C(bridge)) and the rule's shape on
        C(docker0).
      - Nothing is deleted while the running Docker still masquerades (restart pending) or the configuration
        still has it on.
    type: bool
    default: false
  bridge_name:
    description: Name of Docker's default bridge, when the Docker CLI cannot tell.
    type: str
  bridge_cidrs:
    description: Subnets of Docker's default bridge (IPv4 and IPv6), when the Docker CLI cannot tell.
    type: list
    elements: str
  report_networks:
    description:
      - List user-defined bridge networks that still masquerade (RV(masquerading_networks)), each with a warning
        saying how to recreate it with C(com.docker.network.bridge.enable_ip_masquerade=false).
    type: bool
    default: false
  docker_bin:
    description: The Docker CLI used by O(remove_stale_rules) and O(report_networks). Default is C(docker) on C(PATH).
    type: path
notes:
  - >-
    C("ip-masq": false) covers the default bridge only. Networks created with C(docker network create) (and by
    Compose) masquerade unless created with C(-o com.docker.network.bridge.enable_ip_masquerade=false).
  - >-
    With C("iptables": false) Docker writes no rules at all; the setting is still made.
  - >-
    With C("firewall-backend": "nftables") Docker keeps its rules in the nft tables C(ip docker-bridges) and
    C(ip6 docker-bridges); O(remove_stale_rules) looks there too when C(nft) is installed. A C(return) or
    C(accept) in another table (ours included) does not stop that table's chain at the same hook from
    masquerading. Docker's masquerading must be off, as this module makes it.
  - The P(ipmasq.agent.ip_masq#role) role runs this module, restarts Docker through a handler, then runs it
    again with O(remove_stale_rules) and O(report_networks).
seealso:
  - module: ipmasq.agent.flannel_ip_masq
  - module: ipmasq.agent.masq_chain
  - name: Docker daemon configuration file
    description: The C(daemon.json) reference.
    link: https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file
'''

EXAMPLES = r'''
- name: Docker does not masquerade its default bridge
  ipmasq.agent.docker_ip_masq:
  notify: Restart docker

- name: After the restart, remove a rule that survived and list networks that still masquerade
  ipmasq.agent.docker_ip_masq:
    remove_stale_rules: true
    report_networks: true

- name: Put Docker's configuration back as it was
  ipmasq.agent.docker_ip_masq:
    state: absent
  notify: Restart docker
'''

RETURN = r'''
msg:
  description: What the run changed (the files edited, the nat rules removed, whether a restart is required), or C(no change);
    in check mode C(would edit ...).
  returned: always
  type: str
  sample: 'docker: 1 file edited (/etc/docker/daemon.json), restart required'
  version_added: 2.0.0
installed:
  description: Whether Docker was found (its unit, or C(dockerd) on C(PATH)). When false nothing was done.
  returned: always
  type: bool
  sample: true
state:
  description: The state asked for.
  returned: always
  type: str
  sample: present
restart_required:
  description: Whether a file was changed, so Docker must restart to apply it.
  returned: always
  type: bool
  sample: true
where:
  description: Where the setting lives - C(daemon.json) or C(command line) (C(--ip-masq) in the unit or an environment file).
  returned: when installed and state is present
  type: str
  sample: daemon.json
daemon_json:
  description: The configuration file used (O(daemon_json) or C(--config-file)).
  returned: when installed and state is present
  type: str
  sample: /etc/docker/daemon.json
default_bridge_masquerade:
  description: Whether Docker will still masquerade its default bridge after a restart (a C(true) flag that cannot be edited).
  returned: when installed and state is present
  type: bool
  sample: false
flag_sources:
  description: Every C(--ip-masq) on the C(dockerd) command line after the run, with the file and variable it comes from.
  returned: when installed
  type: list
  elements: dict
  sample: [{"path": "/etc/default/docker", "variable": "DOCKER_OPTS", "text": "--ip-masq=false", "runtime": false}]
unit:
  description: The unit file found.
  returned: when installed
  type: str
  sample: /lib/systemd/system/docker.service
unit_files:
  description: The unit file and its drop-ins, in the order systemd reads them.
  returned: when installed
  type: list
  elements: str
edited:
  description: Files changed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/docker/daemon.json]
backups:
  description: Timestamped copies made next to the edited files.
  returned: always
  type: list
  elements: str
  sample: ["/etc/docker/daemon.json.4242.2026-01-01@10:00:00~"]
removed_rules:
  description:
    - Rules and chains deleted (or that would be), per family, as C(iptables-save) printed them.
    - Rules deleted from Docker's nft tables (since 1.1.0) as C(<family> <table> <chain>) and the rule as C(nft)
      prints it.
  returned: when installed
  type: list
  elements: str
  sample:
    - "IPv4: -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE"
    - 'IPv4: ip docker-bridges nat-postrouting-out__docker0: oifname != "docker0" ip saddr 172.17.0.0/16 counter
      masquerade comment "MASQUERADE"'
bridge:
  description: The default bridge and subnets the rule search used.
  returned: when O(remove_stale_rules=true) and Docker has a default bridge
  type: dict
  sample: {"name": "docker0", "subnets": ["172.17.0.0/16"]}
masquerading_networks:
  description: User-defined bridge networks that still masquerade, with C(name), C(id), C(bridge), C(subnets) and C(advice).
  returned: when installed
  type: list
  elements: dict
messages:
  description: What was found and done, in sentences.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import argument_spec, work
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker import DOCKER_OPTIONS, docker_sync
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(**DOCKER_OPTIONS),
        supports_check_mode=True,
    )
    run_module(module, work(docker_sync))


if __name__ == '__main__':
    main()
