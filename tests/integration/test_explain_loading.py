"""What an audit loads, and what an explanation loads (issue 35, item 2).

The audit (``snat_sources``, and the role's audit gate, which runs the same
``_snat_sources.inspect``) reads every nat table and walks it; it never
follows one flow, so it must not pay for the backends' explanation code
(``iptables_backend.explain``, ``nftables_backend.explain``) nor the
engine's tracer (``engine.trace``): an audit table hands over its programs
as a function that loads a backend's explain.py only when asked.  An
explanation (``snat_explain``) loads them.

Real module processes (as Ansible starts them: ``python module.py ARGS``)
in a namespace of the test's own, against real iptables and nft, ours and
foreign rules in both (so both backends' readers run and both would have
programs to hand over).
"""
import json
import os
import sys
import tempfile

import pytest

from ipmasq_lab import netlab

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

MODULES = os.path.join(netlab.ROOT, 'plugins', 'modules')
CORE = 'ansible_collections.ipmasq.agent.plugins.module_utils._core.'
# Run a module file as __main__ and, when it exits (AnsibleModule exits with
# sys.exit), print the core's modules the process loaded on stderr's last line.
WRAP = ('import atexit, json, runpy, sys\n'
        'atexit.register(lambda: sys.stderr.write("\\nLOADED " + json.dumps(sorted('
        'm[len(%r):] for m in sys.modules if m.startswith(%r))) + "\\n"))\n'
        'sys.argv = sys.argv[1:]\n'
        'runpy.run_path(sys.argv[0], run_name="__main__")\n' % (CORE, CORE))
EXPLAIN_CODE = ('iptables_backend.explain', 'nftables_backend.explain', 'engine.trace')
FOREIGN_NFT = """table ip early {
    chain post {
        type nat hook postrouting priority 50; policy accept;
        ip saddr 10.244.1.128/25 ip daddr 192.0.2.0/24 snat to 203.0.113.9
    }
}
"""


def run_module(node, name, args):
    """``(result, the core's modules loaded)`` of one module process in the node."""
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump({'ANSIBLE_MODULE_ARGS': args}, f)
    try:
        env = node.backend.env(dict(os.environ, PYTHONPATH=netlab.COLLECTIONS, LC_ALL='C.UTF-8'))
        proc = node.ns.exec([sys.executable, '-c', WRAP, os.path.join(MODULES, name + '.py'), f.name],
                            check=False, env=env, timeout=120)
    finally:
        os.unlink(f.name)
    lines = [line for line in proc.stderr.splitlines() if line.startswith('LOADED ')]
    assert lines, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout), json.loads(lines[-1][len('LOADED '):])


def test_an_audit_loads_no_explanation_code_and_an_explanation_does(nft_node):
    node = nft_node
    node.add_foreign()
    node.nft('-f', '-', input=FOREIGN_NFT)
    res, _loaded = run_module(node, 'masq_chain', {'backend': 'iptables'})
    assert not res.get('failed'), res

    res, loaded = run_module(node, 'snat_sources', {'include_nft': 'always'})
    assert not res.get('failed'), res
    # The audit read both: iptables-nft's nat table and the nft ruleset (ours and foreign).
    assert 'iptables_backend.audit' in loaded and 'nftables_backend.audit' in loaded, loaded
    assert any(s['backend'] == 'nft' for s in res['sources']) and any(s['chain'] == 'IP-MASQ-AGENT' for s in res['sources']), res
    assert [m for m in EXPLAIN_CODE if m in loaded] == [], loaded

    res, loaded = run_module(node, 'snat_explain', {'src': '10.244.1.130', 'dst': '192.0.2.10', 'proto': 'udp',
                                                    'dport': '53', 'out_interface': 'eth0'})
    assert not res.get('failed'), res
    assert (res['verdict'], res['to'], res['decided_by']['table']) == ('snat', '203.0.113.9', 'ip early'), res
    assert [m for m in EXPLAIN_CODE if m in loaded] == list(EXPLAIN_CODE), loaded
