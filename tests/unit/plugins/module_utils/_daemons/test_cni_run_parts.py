"""Unit tests of the CNI editor's run at its edges (_daemons/cni.py): the
semantic restore of a network file its owner changed, which emptied chains
go, when a container counts as gone, and a tool's message in one line.  On
real plugins and packets: tests/integration/test_cni_run.py."""
import json
import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import one_line
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import parse_save
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import cni, cni_chains, cni_names
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import Backups
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import Files

ORIGINAL = ('{"cniVersion": "1.0.0", "name": "n", "plugins": [\n'
            ' {"type": "bridge", "ipMasq": true, "ipam": {"type": "host-local", "dataDir": "/run/ipam"}},\n'
            ' {"type": "portmap", "ipMasq": true}]}\n')


def test_semantic_restore_puts_back_only_our_key_and_keeps_the_owners_change():
    ours = ORIGINAL.replace('"type": "bridge", "ipMasq": true', '"type": "bridge", "ipMasq": false')
    owners = ours.replace('"type": "bridge",', '"type": "bridge", "mtu": 1400,')
    got = cni._semantic_restore('/x.conflist', owners, ORIGINAL)
    assert got == owners.replace('"ipMasq": false', '"ipMasq": true')
    # portmap's ipMasq, which is not the plugin's masquerading, is never touched.
    assert got.count('"ipMasq": true') == 2


def test_semantic_restore_leaves_a_false_the_original_had_and_a_changed_plugin_list():
    was_false = ORIGINAL.replace('"type": "bridge", "ipMasq": true', '"type": "bridge", "ipMasq": false')
    assert cni._semantic_restore('/x.conflist', was_false + ' ', was_false) == was_false + ' '
    other_list = ORIGINAL.replace('"type": "portmap"', '"type": "firewall"')
    assert cni._semantic_restore('/x.conflist', other_list, ORIGINAL) is None
    assert cni._semantic_restore('/x.conflist', '{not json', ORIGINAL) is None


def _parse(chains, lines):
    text = '*nat\n:POSTROUTING ACCEPT [0:0]\n' + ''.join(':%s - [0:0]\n' % c for c in chains)
    return parse_save(text + ''.join(line + '\n' for line in lines) + 'COMMIT\n')


def test_only_gone_chains_that_are_empty_and_unreferenced_are_deleted():
    empty, busy, jumped = (cni_names.chain_name('n', c) for c in ('c1', 'c2', 'c3'))
    table = _parse([empty, busy, jumped], ['-A %s -j MASQUERADE' % busy, '-A POSTROUTING -j %s' % jumped])
    _rules, chains = cni.cni_rules(table, 4, ['n'], gone=[empty, busy, jumped, 'CNI-not-there'])
    assert chains == [empty]
    assert cni.cni_rules(table, 4, ['n'])[1] == []


def test_a_container_is_gone_when_the_runtime_records_no_longer_list_it(tmp_path):
    files = Files(str(tmp_path))
    backups = Backups(files, '/var/lib/ipmasq-agent/backup', 'cni')
    emptied = cni_chains.EmptiedChains(files, backups, '/var/lib/cni', {'n': cni.Network('/x.conflist', ORIGINAL).data_dirs})
    entry = {'family': 4, 'chain': cni_names.chain_name('n', 'c1'), 'network': 'n', 'container': 'c1'}
    assert emptied._gone(entry) is False, 'no record on the node: it cannot be known gone'
    leases = tmp_path / 'run' / 'ipam' / 'n'
    leases.mkdir(parents=True)
    (leases / '10.1.0.2').write_text('c1\neth0\n')
    assert emptied._gone(entry) is False
    (leases / '10.1.0.2').unlink()
    assert emptied._gone(entry) is True
    results = tmp_path / 'var' / 'lib' / 'cni' / 'results'
    results.mkdir(parents=True)
    (results / 'n-c1-eth0').write_text('{}')
    assert emptied._gone(entry) is False
    os.unlink(str(results / 'n-c1-eth0'))
    assert emptied._gone(entry) is True


def test_the_record_keeps_what_the_read_found_and_goes_when_empty(tmp_path):
    files = Files(str(tmp_path))
    backups = Backups(files, '/backup', 'cni')
    emptied = cni_chains.EmptiedChains(files, backups, '/var/lib/cni', {})
    chain = cni_names.chain_name('n', 'c1')
    comment = '-m comment --comment "name: \\"n\\" id: \\"c1\\""'
    table = _parse([chain], ['-A POSTROUTING -s 10.1.0.2/32 %s -j %s' % (comment, chain),
                             '-A %s %s -j MASQUERADE' % (chain, comment)])
    rules, chains = cni.cni_rules(table, 4, ['n'])
    emptied.seen(4, table, rules, chains)
    emptied.save()
    record = tmp_path / 'backup' / cni_chains.CHAINS_RECORD
    assert json.loads(record.read_text()) == [{'family': 4, 'chain': chain, 'network': 'n', 'container': 'c1'}]
    again = cni_chains.EmptiedChains(files, backups, '/var/lib/cni', {})
    again.seen(4, _parse([], []), [], [])
    again.save()
    assert not record.exists()


def test_one_line():
    text = ("iptables-restore v1.8.9 (nf_tables): Chain 'CNI-x' does not exist\nError occurred at line: 8\n"
            "Try `iptables-restore -h' or 'iptables-restore --help' for more information.\n")
    assert one_line(text) == "iptables-restore v1.8.9 (nf_tables): Chain 'CNI-x' does not exist Error occurred at line: 8"


def test_host_local_data_dirs_are_read_as_the_plugin_reads_them():
    """The leases' dataDir comes from the network's one decode, keys folded as Go folds them."""
    folded = ('{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge", "ipMasq": true, '
              '"IPAM": {"Type": "host-local", "DATADIR": "/srv/leases", "subnet": "10.1.0.0/24"}}, '
              '{"type": "ptp", "ipam": {"type": "host-local"}}, {"type": "portmap"}]}')
    assert cni.Network('/x.conflist', folded).data_dirs == ['/srv/leases', '/var/lib/cni/networks']
