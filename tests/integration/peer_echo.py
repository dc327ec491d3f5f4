"""A tiny TCP probe for the packet tests and the demo (standard library only).

Server mode, run inside a receiver's network namespace::

    peer_echo.py serve --listen 203.0.113.10 --listen 2001:db8:e::10 \\
        --port 8080 --max-conns 2 --timeout 10

listens on every ``--listen`` address, prints ``LISTENING`` once all sockets
are bound (the caller waits for that line), then for each accepted
connection prints ``SEEN <local address> <peer address> <peer port>`` and sends the peer
address back (one line) before closing.  It exits after ``--max-conns``
connections or ``--timeout`` seconds, whichever comes first.

Client mode, run inside the pod's namespace::

    peer_echo.py connect --target 203.0.113.10 --target 10.10.0.10 \\
        --port 8080 --timeout 2

connects to every target at once (one thread each, each with its own socket
timeout) and prints one JSON object: target -> {"seen": <what the receiver
said it saw>, "local": <our own source address>} or {"error": "no reply"}
(nothing came back in time: the SYN-ACK could not return) or another error
text.  Always exits 0 when it could print a result.
"""
import argparse
import json
import selectors
import socket
import sys
import threading
import time

NO_REPLY = 'no reply'


def _family(address):
    return socket.AF_INET6 if ':' in address else socket.AF_INET


def serve(listen, port, max_conns, timeout):
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    socks = []
    for address in listen:
        sock = socket.socket(_family(address), socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(8)
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
        socks.append(sock)
    print('LISTENING', flush=True)
    served = 0
    try:
        while served < max_conns:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _events in sel.select(timeout=min(left, 1.0)):
                try:
                    conn, peer = key.fileobj.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                with conn:
                    conn.settimeout(2.0)
                    local = conn.getsockname()[0]
                    print('SEEN %s %s %d' % (local, peer[0], peer[1]), flush=True)
                    try:
                        conn.sendall((peer[0] + '\n').encode())
                    except OSError:
                        pass
                served += 1
    finally:
        for sock in socks:
            sock.close()
    return 0


def _connect_one(target, port, timeout, out):
    try:
        with socket.create_connection((target, port), timeout=timeout) as sock:
            local = sock.getsockname()[0]
            data = b''
            end = time.monotonic() + timeout
            while not data.endswith(b'\n') and time.monotonic() < end:
                chunk = sock.recv(256)
                if not chunk:
                    break
                data += chunk
        text = data.decode(errors='replace').strip()
        out[target] = {'seen': text, 'local': local} if text else {'error': NO_REPLY, 'local': local}
    except socket.timeout:
        out[target] = {'error': NO_REPLY}
    except OSError as exc:
        out[target] = {'error': '%s' % (exc.strerror or exc)}


def connect(targets, port, timeout):
    out = {}
    threads = [threading.Thread(target=_connect_one, args=(t, port, timeout, out), daemon=True)
               for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 2)
    for target in targets:
        out.setdefault(target, {'error': NO_REPLY})
    print(json.dumps(out, sort_keys=True), flush=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='mode', required=True)
    srv = sub.add_parser('serve')
    srv.add_argument('--listen', action='append', required=True)
    srv.add_argument('--port', type=int, default=8080)
    srv.add_argument('--max-conns', type=int, default=1)
    srv.add_argument('--timeout', type=float, default=10.0)
    cli = sub.add_parser('connect')
    cli.add_argument('--target', action='append', required=True)
    cli.add_argument('--port', type=int, default=8080)
    cli.add_argument('--timeout', type=float, default=2.0)
    args = parser.parse_args(argv)
    if args.mode == 'serve':
        return serve(args.listen, args.port, args.max_conns, min(args.timeout, 120.0))
    return connect(args.target, args.port, min(args.timeout, 30.0))


if __name__ == '__main__':
    sys.exit(main())
