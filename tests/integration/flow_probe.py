"""Many flows at once, for the SNAT explanation's packet test (standard library only).

Sniff mode, run inside a receiver's network namespace::

    flow_probe.py sniff --expect 12 --timeout 5

opens raw IPv4 sockets for UDP and TCP, prints ``READY``, then one line
``SEEN <proto> <dst> <dport> <src>`` for each first packet of a flow (the
source address the receiver saw), and exits after ``--expect`` flows or
``--timeout`` seconds, whichever comes first.

Send mode, run inside the sending namespace, the flows as JSON on stdin
(``[[src, dst, proto, dport], ...]``)::

    flow_probe.py send

sends one packet per flow (UDP: a datagram; TCP: a SYN, the connect is not
waited for), each from its own socket bound to ``src``; bounded by the
number of flows.  Prints ``SENT <n>``.
"""
import argparse
import json
import select
import socket
import struct
import sys
import time

PROTOS = {'udp': socket.IPPROTO_UDP, 'tcp': socket.IPPROTO_TCP}
NAMES = {socket.IPPROTO_UDP: 'udp', socket.IPPROTO_TCP: 'tcp'}


def sniff(expect, timeout):
    socks = [socket.socket(socket.AF_INET, socket.SOCK_RAW, proto) for proto in PROTOS.values()]
    print('READY', flush=True)
    seen = set()
    deadline = time.monotonic() + timeout
    while len(seen) < expect:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _w, _x = select.select(socks, [], [], left)
        for sock in ready:
            data = sock.recv(65535)
            if len(data) < 24:
                continue
            ihl = (data[0] & 0x0f) * 4
            proto = data[9]
            src = socket.inet_ntoa(data[12:16])
            dst = socket.inet_ntoa(data[16:20])
            dport = struct.unpack('!H', data[ihl + 2:ihl + 4])[0]
            key = (NAMES.get(proto), dst, dport)
            if key in seen:
                continue
            seen.add(key)
            print('SEEN %s %s %d %s' % (key[0], dst, dport, src), flush=True)


def send(flows):
    socks = []
    try:
        for src, dst, proto, dport in flows:
            if proto == 'udp':
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((src, 0))
                s.sendto(b'flow', (dst, dport))
            else:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.bind((src, 0))
                try:
                    s.connect((dst, dport))
                except (BlockingIOError, OSError):
                    pass
            socks.append(s)
        time.sleep(0.2)
    finally:
        for s in socks:
            s.close()
    print('SENT %d' % len(socks), flush=True)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest='mode', required=True)
    p = sub.add_parser('sniff')
    p.add_argument('--expect', type=int, required=True)
    p.add_argument('--timeout', type=float, default=5.0)
    sub.add_parser('send')
    args = parser.parse_args()
    if args.mode == 'sniff':
        sniff(args.expect, min(args.timeout, 60.0))
    else:
        send(json.load(sys.stdin)[:5000])


if __name__ == '__main__':
    main()
