"""Unit tests of the CNI networks' editor (_daemons/cni.py): which
``ipMasq`` of which plugin is switched off and that every other byte stays,
and which nat rules the clean-up selects.  The modules on real plugins and
packets: tests/integration/test_cni.py."""
import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import parse_save
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend.nft_json import deletion, parse_nft
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import cni, cni_names

CONTAINERD = '''{
  "cniVersion": "1.0.0",
  "name": "containerd-net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq":   true,
      "promiscMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "ipMasq": true}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "ipMasq": true}
  ]
}
'''


def test_conflist_only_the_bridge_flag_changes():
    net = cni.Network('/etc/cni/net.d/10-containerd-net.conflist', CONTAINERD)
    assert net.name == 'containerd-net' and net.types == ['bridge', 'portmap'] and net.masq_types == ['bridge']
    after = net.switched_off(CONTAINERD)
    assert after == CONTAINERD.replace('"ipMasq":   true', '"ipMasq":   false')
    assert cni.Network('x.conflist', after).edits == []


def test_single_conf_any_case_every_duplicate():
    text = '\ufeff{"name": "n", "type": "ptp", "IPMASQ": true, "ipmasq": true, "ipMasq": false}'
    net = cni.Network('/etc/cni/net.d/n.conf', text)
    assert net.switched_off(text) == '\ufeff{"name": "n", "type": "ptp", "IPMASQ": false, "ipmasq": false, "ipMasq": false}'


@pytest.mark.parametrize('text', [
    '{"name": "n", "type": "macvlan", "ipMasq": true}',
    '{"name": "n", "plugins": [{"type": "bridge", "ipMasq": "true"}, 7]}',
    '{"name": "n", "plugins": []}',
])
def test_nothing_to_switch(text):
    assert cni.Network('n.conflist', text).edits == []


@pytest.mark.parametrize('text,words', [
    ('{"name": "n", "plugins": [}', 'is not valid JSON at line 1'),
    ('[1]', 'must hold one JSON object'),
])
def test_bad_file_is_an_error_naming_it(text, words):
    with pytest.raises(MasqError) as e:
        cni.Network('/etc/cni/net.d/bad.conflist', text)
    assert '/etc/cni/net.d/bad.conflist' in e.value.msg and words in e.value.msg and 'Nothing was changed' in e.value.msg


def _save(*lines):
    chains = sorted(set(line.split()[1] for line in lines if line.startswith('-A ')) - {'POSTROUTING'})
    head = ['*nat', ':POSTROUTING ACCEPT [0:0]'] + [':%s - [0:0]' % c for c in chains]
    return parse_save('\n'.join(head + list(lines) + ['COMMIT']) + '\n')


def _masq_rules(net, cid, pod='10.88.0.2'):
    chain = cni_names.chain_name(net, cid)
    comment = '-m comment --comment "name: \\"%s\\" id: \\"%s\\""' % (net, cid)
    return chain, ['-A POSTROUTING -s %s/32 %s -j %s' % (pod, comment, chain),
                   '-A %s -d 10.88.0.0/16 %s -j ACCEPT' % (chain, comment),
                   '-A %s ! -d 224.0.0.0/4 %s -j MASQUERADE' % (chain, comment)]


def test_rules_of_the_networks_only():
    chain, mine = _masq_rules('containerd-net', 'c1')
    _other_chain, other = _masq_rules('other', 'o1', '10.99.0.2')
    portmap = ['-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ',
               '-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE']
    table = _save(*(mine + other + portmap))
    rules, chains = cni.cni_rules(table, 4, ['containerd-net'])
    assert [r.line for r in rules] == mine and chains == []


def test_a_chain_that_lost_its_jump_is_emptied():
    _chain, mine = _masq_rules('containerd-net', 'c1')
    rules, _chains = cni.cni_rules(_save(*mine[1:]), 4, ['containerd-net'])
    assert [r.line for r in rules] == mine[1:]


def test_a_foreign_jump_is_an_error():
    chain, mine = _masq_rules('containerd-net', 'c1')
    with pytest.raises(MasqError) as e:
        cni.cni_rules(_save(*(mine + ['-A OUTPUT -j %s' % chain])), 4, ['containerd-net'])
    assert chain in e.value.msg and '-A OUTPUT -j %s' % chain in e.value.msg and 'Nothing was changed' in e.value.msg


def test_a_jump_whose_comment_names_another_container_is_an_error():
    _chain, mine = _masq_rules('containerd-net', 'c1')
    wrong = mine[0].replace('\\"c1', '\\"c2')       # not the chain the plugin names for c2
    with pytest.raises(MasqError) as e:
        cni.cni_rules(_save(wrong, *mine[1:]), 4, ['containerd-net'])
    assert wrong in e.value.msg


def test_nft_flavour_picks_the_network_rules_by_handle():
    comment = '%s%s, net: containerd-net, if: eth0, id: c1' % (cni_names.nft_comment_prefix('containerd-net'), 'a' * 16)
    other = '%s%s, net: other, if: eth0, id: o1' % (cni_names.nft_comment_prefix('other'), 'b' * 16)
    masq = [{'match': {'op': '==', 'left': {'payload': {'protocol': 'ip', 'field': 'saddr'}}, 'right': '10.88.0.2'}},
            {'masquerade': None}]
    items = [{'table': {'family': 'inet', 'name': 'cni_plugins_masquerade', 'handle': 1}},
             {'chain': {'family': 'inet', 'table': 'cni_plugins_masquerade', 'name': 'masq_checks', 'handle': 2}}]
    for handle, text in ((5, comment), (6, other)):
        items.append({'rule': {'family': 'inet', 'table': 'cni_plugins_masquerade', 'chain': 'masq_checks',
                               'handle': handle, 'expr': masq, 'comment': text}})
    picked = cni.cni_nft_rules(parse_nft({'nftables': items}), ['containerd-net'])
    assert [deletion(what) for _text, what in picked] == [[{'delete': {'rule': {
        'family': 'inet', 'table': 'cni_plugins_masquerade', 'chain': 'masq_checks', 'handle': 5}}}]]
