# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for flanneld in the Molecule scenarios (flanneld is not in the archive).

It does what flanneld does that matters to ipmasq.agent, and nothing else:

- reads --ip-masq the way flanneld does: the command line wins, else the
  FLANNELD_IP_MASQ environment variable, else false ("-ip-masq", "--ip-masq",
  "--ip-masq=true", "-ip-masq=1" all switch it on);
- writes /run/flannel/subnet.env with FLANNEL_IPMASQ=true|false;
- with ip-masq on, writes flannel's FLANNEL-POSTRTG chain (comment
  "flanneld masq") and appends its jump from POSTROUTING, as flanneld does;
  with it off it leaves existing rules alone (flanneld does not remove them);
- tells systemd it is ready (Type=notify) and sleeps until stopped.
"""

import os
import signal
import socket
import subprocess
import sys

NETWORK = '10.244.0.0/16'
SUBNET = '10.244.1.0/24'
TRUE = ('', '1', 't', 'true')
COMMENT = '"flanneld masq"'
RULES = [
    '-m mark --mark 0x4000/0x4000 -m comment --comment %s -j RETURN' % COMMENT,
    '-s %s -d %s -m comment --comment %s -j RETURN' % (SUBNET, NETWORK, COMMENT),
    '-s %s -d %s -m comment --comment %s -j RETURN' % (NETWORK, SUBNET, COMMENT),
    '! -s %s -d %s -m comment --comment %s -j RETURN' % (NETWORK, SUBNET, COMMENT),
    '-s %s ! -d 224.0.0.0/4 -m comment --comment %s -j MASQUERADE --random-fully' % (NETWORK, COMMENT),
    '! -s %s -d %s -m comment --comment %s -j MASQUERADE --random-fully' % (NETWORK, NETWORK, COMMENT),
]
JUMP = ['-m', 'comment', '--comment', 'flanneld masq', '-j', 'FLANNEL-POSTRTG']


def ip_masq(argv, environ):
    """flanneld's value of --ip-masq: flag, else environment, else false."""
    value = None
    for arg in argv:
        name, sep, text = arg.lstrip('-').partition('=')
        if name == 'ip-masq':
            value = (text if sep else '').lower() in TRUE
    if value is None:
        env = environ.get('FLANNELD_IP_MASQ')
        value = env is not None and env.lower() in ('1', 't', 'true')
    return value


def write_rules():
    text = '*nat\n:FLANNEL-POSTRTG - [0:0]\n' + ''.join('-A FLANNEL-POSTRTG %s\n' % r for r in RULES) + 'COMMIT\n'
    subprocess.run(['iptables-restore', '--wait=30', '--noflush'], input=text.encode(), check=True)
    if subprocess.run(['iptables', '-w', '30', '-t', 'nat', '-C', 'POSTROUTING'] + JUMP, check=False,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run(['iptables', '-w', '30', '-t', 'nat', '-A', 'POSTROUTING'] + JUMP, check=True)


def notify_ready():
    path = os.environ.get('NOTIFY_SOCKET')
    if not path:
        return
    if path.startswith('@'):
        path = '\0' + path[1:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.connect(path)
        sock.sendall(b'READY=1')
    finally:
        sock.close()


def main():
    masq = ip_masq(sys.argv[1:], os.environ)
    if masq:
        write_rules()
    if not os.path.isdir('/run/flannel'):
        os.makedirs('/run/flannel')
    with open('/run/flannel/subnet.env', 'w') as f:
        f.write('FLANNEL_NETWORK=%s\nFLANNEL_SUBNET=%s\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=%s\n'
                % (NETWORK, SUBNET.replace('.0/24', '.1/24'), 'true' if masq else 'false'))
    print('flanneld stand-in: ip-masq=%s, argv=%s' % (str(masq).lower(), sys.argv[1:]), flush=True)
    notify_ready()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == '__main__':
    main()
