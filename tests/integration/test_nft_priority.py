"""Our nftables table's base chain runs where ``jump_position`` says, on real packets.

iptables' nat POSTROUTING (legacy and iptables-nft) is a base chain at
priority srcnat (100).  Of base chains of equal priority the kernel runs the
one made last first, so a table of ours at srcnat ran before or after
kube-proxy's and Docker's rules depending on which was made last (a reboot,
``nft flush ruleset``, a Docker restart); no listing showed it.  Our chain is
now at ``srcnat + 1`` (``jump_position: append``, the default: after
iptables' rules, as an appended jump is) or ``srcnat - 1`` (``first``:
before them), whatever was made last.

A table written before (at srcnat) or one of the other position is replaced
by the run in one nft transaction (the kernel cannot move a base chain to
another priority): ``nft monitor`` in the node shows the old table deleted
and the new one added in the same generation, and a stream of new UDP flows
from the pod during the run all leave masqueraded.

The same core runs in the resync agent; the unit tests of the priority, the
drift check and the explanation's reading of ``srcnat + 1`` are in
tests/unit/plugins/module_utils/_core/test_nftables.py and test_explain_trace.py.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from ipmasq_lab import netlab
# autouse: the root namespace stays as it was.
from test_packets import root_namespace_untouched  # noqa: F401 pylint: disable=unused-import
from ipmasq_lab.topology import EXT4, NODE_EXT4, POD4, Topology

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, 'flow_probe.py')
MODULE = os.path.join(netlab.ROOT, 'plugins', 'modules', 'masq_chain.py')
IPT_SNAT = '203.0.113.8'        # the iptables rule's source (a second address of the node on to-ext)
TABLE = ['nft', 'list', 'table', 'inet', 'ip-masq-agent']
STREAM_BATCH = 20               # new UDP flows per sender run
STREAM_BATCHES = 200            # at most, however long the run takes


def masq_chain(topo, **args):
    """ipmasq.agent.masq_chain run in the node, directly (AnsibleModule reads
    its arguments from a file): its result, which must not have failed."""
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump({'ANSIBLE_MODULE_ARGS': dict(args, backend='nftables')}, f)
    try:
        env = dict(os.environ, PYTHONPATH=netlab.COLLECTIONS, LC_ALL='C.UTF-8')
        out = topo.node.exec([sys.executable, MODULE, f.name], check=False, env=env, timeout=120)
    finally:
        os.unlink(f.name)
    res = json.loads(out.stdout)
    assert not res.get('failed'), res.get('msg')
    return res


def header(topo):
    """Our chain's header line, as nft lists it."""
    lines = [line.strip() for line in topo.node.exec(TABLE).stdout.splitlines()]
    return [line for line in lines if line.startswith('type nat hook postrouting')]


def seen_from_pod(topo):
    """The source the external host saw on a new TCP connection from the pod."""
    return topo.probe(['external'])['external']


def remake_iptables_postrouting(topo):
    """iptables-nft's nat POSTROUTING made again, now after our table: were
    ours at srcnat too, the kernel would run this one first."""
    ipt = topo.backend.tool('iptables')
    topo.node.exec([ipt, '-w', '-t', 'nat', '-F', 'POSTROUTING'])
    topo.node.exec(['nft', 'delete', 'chain', 'ip', 'nat', 'POSTROUTING'])
    topo.node.exec([ipt, '-w', '-t', 'nat', '-A', 'POSTROUTING', '-s', POD4, '-d', EXT4, '-j', 'SNAT',
                    '--to-source', IPT_SNAT])


def test_append_runs_after_iptables_nat_and_first_before_it_whatever_was_made_last():
    """An iptables-nft rule SNATs the pod's flow to .8; ours masquerades it
    (to .1).  append: iptables' rule decides, also when our table was made
    after it; first: ours decides, also when iptables' chain is made after
    ours; back to append, iptables' again.  Each switch rewrites the table."""
    with Topology.with_tools('nft', ipv6=False) as topo:
        netlab.addr(topo.node, 'to-ext', IPT_SNAT + '/24')
        topo.iptables(['-t', 'nat', '-A', 'POSTROUTING', '-s', POD4, '-d', EXT4, '-j', 'SNAT',
                       '--to-source', IPT_SNAT])
        assert seen_from_pod(topo) == IPT_SNAT
        res = masq_chain(topo)            # our table made after iptables' chain
        assert res['changed'] is True
        assert header(topo) == ['type nat hook postrouting priority srcnat + 1; policy accept;']
        assert seen_from_pod(topo) == IPT_SNAT
        res = masq_chain(topo, jump_position='first')
        assert res['changed'] is True and res['actions'] == [
            'nftables: rewrite table inet ip-masq-agent (chain postrouting is not a nat postrouting chain at priority '
            'srcnat - 1)'], res['actions']
        assert header(topo) == ['type nat hook postrouting priority srcnat - 1; policy accept;']
        assert seen_from_pod(topo) == NODE_EXT4
        remake_iptables_postrouting(topo)
        assert seen_from_pod(topo) == NODE_EXT4
        assert masq_chain(topo, jump_position='first')['changed'] is False
        res = masq_chain(topo)
        assert res['changed'] is True and res['actions'] == [
            'nftables: rewrite table inet ip-masq-agent (chain postrouting is not a nat postrouting chain at priority '
            'srcnat + 1)'], res['actions']
        assert header(topo) == ['type nat hook postrouting priority srcnat + 1; policy accept;']
        assert seen_from_pod(topo) == IPT_SNAT


def _stream(topo, stop, sent):
    """New UDP flows from the pod to the external host, STREAM_BATCH at a
    time, until ``stop`` (at most STREAM_BATCHES runs); ``sent``: their dports."""
    port = 20000
    for _batch in range(STREAM_BATCHES):
        if stop.is_set():
            return
        flows = [[POD4, EXT4, 'udp', port + i] for i in range(STREAM_BATCH)]
        topo.pod.exec([sys.executable, PROBE, 'send'], input=json.dumps(flows), timeout=30)
        sent.extend(f[3] for f in flows)
        port += STREAM_BATCH


def generations(monitor_text):
    """``nft monitor``'s events, one list per transaction (each ends with ``# new generation``)."""
    out, current = [], []
    for line in monitor_text.splitlines():
        if line.startswith('# new generation'):
            out.append(current)
            current = []
        elif line.strip():
            current.append(line.strip())
    return out


def test_a_table_at_srcnat_moves_in_one_transaction_and_no_flow_leaves_unmasqueraded():
    """Our table as every node has it before this change (the chain at
    srcnat), made by hand from the listing.  The check run names the drift;
    the run replaces the table in one generation while new flows stream
    from the pod: every one of them reaches the external host masqueraded."""
    with Topology.with_tools('nft', ipv6=False) as topo:
        masq_chain(topo)
        text = topo.node.exec(TABLE).stdout
        assert 'priority srcnat + 1;' in text
        old = text.replace('priority srcnat + 1;', 'priority srcnat;')
        topo.node.exec(['nft', '-f', '-'], input='delete table inet ip-masq-agent\n' + old)
        assert header(topo) == ['type nat hook postrouting priority srcnat; policy accept;']
        drift = ['nftables: rewrite table inet ip-masq-agent (chain postrouting is not a nat postrouting chain at priority '
                 'srcnat + 1)']
        res = masq_chain(topo, _ansible_check_mode=True)
        assert res['changed'] is True and res['actions'] == drift, res['actions']
        assert header(topo) == ['type nat hook postrouting priority srcnat; policy accept;']

        monitor = topo.node.popen(['timeout', '120', 'nft', 'monitor'],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sniffer = topo.ns['external'].popen([sys.executable, PROBE, 'sniff', '--expect', '100000', '--timeout', '60'],
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stop, sent = threading.Event(), []
        sender = threading.Thread(target=_stream, args=(topo, stop, sent))
        try:
            assert sniffer.stdout.readline().strip() == 'READY'
            time.sleep(0.5)         # nft monitor listens
            sender.start()
            deadline = time.monotonic() + 30
            while len(sent) < 2 * STREAM_BATCH and time.monotonic() < deadline:
                time.sleep(0.05)    # flows already stream before the run starts
            res = masq_chain(topo)
            before_end = len(sent)
            deadline = time.monotonic() + 30
            while len(sent) < before_end + 2 * STREAM_BATCH and time.monotonic() < deadline:
                time.sleep(0.05)    # and after it ends
        finally:
            stop.set()
            if sender.is_alive():
                sender.join(timeout=60)
            time.sleep(0.5)
            for proc in (sniffer, monitor):
                proc.terminate()
            seen_out, _e = sniffer.communicate(timeout=10)
            events, _e = monitor.communicate(timeout=10)
        assert res['changed'] is True and res['actions'] == drift, res['actions']
        assert header(topo) == ['type nat hook postrouting priority srcnat + 1; policy accept;']
        # One transaction: the old table deleted and the new one (its chain at srcnat + 1) added together.
        gens = [g for g in generations(events) if any('ip-masq-agent' in e for e in g)]
        assert len(gens) == 1, events
        assert 'delete table inet ip-masq-agent' in gens[0], gens
        assert any(e.startswith('add chain inet ip-masq-agent postrouting { type nat hook postrouting priority '
                                'srcnat + 1;') for e in gens[0]), gens
        # Every flow of the stream left masqueraded, before, during and after the switch.
        seen = {}
        for line in seen_out.splitlines():
            parts = line.split()
            if len(parts) == 5 and parts[0] == 'SEEN' and parts[1] == 'udp':
                seen[int(parts[3])] = parts[4]
        assert len(sent) >= 4 * STREAM_BATCH, len(sent)
        assert sorted(seen) == sorted(sent), (len(seen), len(sent))
        assert set(seen.values()) == {NODE_EXT4}, dict((p, s) for p, s in seen.items() if s != NODE_EXT4)
