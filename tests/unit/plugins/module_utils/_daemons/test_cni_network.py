"""The CNI editor (_daemons/cni.py, cni_network.py, gojson.py) on network
directories as the container runtime reads them, judged by the lab's own
runtime reader (ipmasq_lab/cni_runtime.py: libcni's loader, Go's
encoding/json key folding and maps, flannel's plugin's ipMasq rule), not by
the code under test.  Files only, in a temporary root (no rules removed):
tests/integration/test_cni_loading.py runs the real bridge plugin on some of them."""
import json
import os
import random
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import cni, files, gojson
from ipmasq_lab import cni_runtime

CONF_DIR = '/etc/cni/net.d'
SUBNET_ENV = '/run/flannel/subnet.env'


def writer():
    with patch_module_args({}):
        return files.Writer(AnsibleModule(argument_spec={}, supports_check_mode=True))


def sync(root, ipv6=False, state='present', check_mode=False):
    params = dict(state=state, conf_dirs=[CONF_DIR], remove_stale_rules=False, ipv6=ipv6, root=root,
                  backup_dir='/var/backups/ipmasq', backup=False)
    return cni.cni_sync(params, None, lambda name: None, writer(), check_mode=check_mode).module_result(check_mode)


def tree_of(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), 'rb') as handle:
            out[name] = handle.read()
    return out


# ---------------------------------------------------------------- key spellings

def spell(name, how):
    """``name`` as a JSON string literal, spelled ``how``."""
    if how == 'upper':
        key = name.upper()
    elif how == 'lower':
        key = name.lower()
    elif how == 'long-s':
        key = name.replace('s', '\u017f')
    elif how == 'kelvin':
        key = name.replace('k', '\u212a').replace('K', '\u212a')
    elif how == 'dotless':
        key = name.replace('i', '\u0131')
    elif how == 'mixed':
        key = ''.join(c.upper() if n % 2 else c.lower() for n, c in enumerate(name))
    else:
        key = name
    literal = json.dumps(key, ensure_ascii=False)
    if how == 'escaped':
        literal = '"' + name[:-1] + '\\u%04x"' % ord(name[-1])
    return literal


SPELLINGS = ('exact', 'exact', 'exact', 'upper', 'lower', 'mixed', 'long-s', 'kelvin', 'escaped', 'dotless')
how = st.sampled_from(SPELLINGS)


def render(pairs, indent=0):
    """A JSON object from ``[(literal key, value)]``; value: JSON text, or a list of pairs (an object) marked by
    a tuple ``('obj', pairs)``, or ``('arr', [values])``."""
    pad = '  ' * (indent + 1)
    parts = []
    for key, val in pairs:
        parts.append('%s%s: %s' % (pad, key, _value(val, indent + 1)))
    return '{\n' + ',\n'.join(parts) + '\n' + '  ' * indent + '}' if parts else '{}'


def _value(val, indent):
    if isinstance(val, tuple) and val[0] == 'obj':
        return render(val[1], indent)
    if isinstance(val, tuple) and val[0] == 'arr':
        return '[' + ', '.join(_value(v, indent) for v in val[1]) + ']'
    return val


def ipam(dual):
    ranges = [('arr', [('obj', [('"subnet"', '"10.244.7.0/24"')])])]
    if dual:
        ranges.append(('arr', [('obj', [('"subnet"', '"fd00:244:7::/64"')])]))
    return ('obj', [('"type"', '"host-local"'), ('"ranges"', ('arr', ranges))])


masq_values = st.sampled_from(['true', 'true', 'false', 'null', '"true"'])
masq_keys = st.lists(st.tuples(how, masq_values), max_size=3)


@st.composite
def plugin(draw):
    kind = draw(st.sampled_from(['bridge', 'bridge', 'ptp', 'flannel', 'flannel', 'portmap', 'macvlan']))
    pairs = [(draw(how.filter(lambda h: h != 'dotless')), json.dumps(kind))]
    pairs = [(spell('type', pairs[0][0]), json.dumps(kind))]
    if kind == 'flannel':
        shape = draw(st.sampled_from(['none', 'null', 'object', 'object', 'two']))
        for _n in range({'none': 0, 'null': 1, 'object': 1, 'two': 2}[shape]):
            if shape == 'null':
                pairs.append((spell('delegate', draw(how)), 'null'))
                continue
            inner = [('"hairpinMode"', 'true'), ('"isDefaultGateway"', 'true')]
            dtype = draw(st.sampled_from([None, None, 'bridge', 'macvlan']))
            if dtype:
                inner.append(('"type"', json.dumps(dtype)))
            inner += [(spell('ipMasq', h), v) for h, v in draw(masq_keys)]
            draw(st.randoms()).shuffle(inner)
            pairs.append((spell('delegate', draw(how)), ('obj', inner)))
    else:
        pairs += [(spell('ipMasq', h), v) for h, v in draw(masq_keys)]
        if kind in ('bridge', 'ptp'):
            pairs.append((spell('ipam', draw(how)), ipam(draw(st.booleans()))))
    if draw(st.booleans()):
        pairs.append(('"mtu"', '1450'))
    draw(st.randoms()).shuffle(pairs)
    return pairs


NAMES = ['10-net', '.hidden', '99-z', 'x', '.conf']
EXTENSIONS = ['.conf', '.conflist', '.json', '.conf.bak', '.CONF', '.json~', '', '.conflist.off']


@st.composite
def network_file(draw):
    plugins = draw(st.lists(plugin(), min_size=1, max_size=3))
    name = '"net%d"' % draw(st.integers(0, 3))
    if draw(st.booleans()):      # a list
        pairs = [('"cniVersion"', '"1.0.0"'), (spell('name', draw(how)), name),
                 (spell('plugins', draw(how)), ('arr', [('obj', p) for p in plugins]))]
        if draw(st.integers(0, 4)) == 0:
            pairs.append(('"plugins"', ('arr', [])))
    else:                         # one plugin
        pairs = [('"cniVersion"', '"0.4.0"'), (spell('name', draw(how)), name)] + plugins[0]
    return render(pairs) + '\n'


@st.composite
def directory(draw):
    names = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(EXTENSIONS)), min_size=1, max_size=4,
                          unique=True))
    return [(base + ext, draw(network_file())) for base, ext in names if base + ext]


def _judge(files_, ipv6, dual_flannel):
    root = tempfile.mkdtemp(prefix='imq-cni-prop-')
    try:
        conf = os.path.join(root, CONF_DIR.lstrip('/'))
        os.makedirs(conf)
        env = os.path.join(root, SUBNET_ENV.lstrip('/'))
        os.makedirs(os.path.dirname(env))
        with open(env, 'w') as handle:
            handle.write('FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_MTU=1450\n'
                         'FLANNEL_IPMASQ=false\n' + ('FLANNEL_IPV6_SUBNET=fd00:244:7::1/64\n' if dual_flannel else ''))
        for name, text in files_:
            with open(os.path.join(conf, name), 'w') as handle:
                handle.write(text)
        before = tree_of(conf)
        seen = cni_runtime.load(conf, flannel_ipmasq=False, flannel_subnet6='fd00:244:7::/64' if dual_flannel else None)
        try:
            first = sync(root, ipv6)
        except MasqError as e:
            # Refused only where a key's meaning depends on the Go version, naming the file; nothing changed.
            assert 'Go 1.21' in e.msg and 'Nothing was changed' in e.msg, e.msg
            assert any('\u0131' in text for _n, text in files_)
            assert tree_of(conf) == before
            return
        managed = {4, 6} if ipv6 else {4}
        after = cni_runtime.load(conf, flannel_ipmasq=False, flannel_subnet6='fd00:244:7::/64' if dual_flannel else None)
        warned = ' '.join(first['warnings'])
        for path, families in after.items():
            name = path[len(root):]
            if families & managed:
                # Left on only with a warning naming it, because it masquerades a family we do not manage.
                assert name in warned, (name, families, first)
                assert families - managed, (name, families)
                assert before[os.path.basename(path)] == tree_of(conf)[os.path.basename(path)]
        # Files the runtime does not load are never edited.
        loaded = set(os.path.basename(p) for p in seen)
        now = tree_of(conf)
        assert dict((n, t) for n, t in now.items() if n not in loaded) == \
            dict((n, t) for n, t in before.items() if n not in loaded)
        second = sync(root, ipv6)
        assert second['changed'] is False and tree_of(conf) == now, second
        back = sync(root, ipv6, state='absent')
        assert back['changed'] is (now != before)
        assert tree_of(conf) == before
    finally:
        shutil.rmtree(root, ignore_errors=True)


FLANNEL_MANIFEST = '{"name": "cbr0", "cniVersion": "0.3.1", "plugins": [{"type": "flannel", "delegate": ' \
    '{"hairpinMode": true, "isDefaultGateway": true}}, {"type": "portmap", "capabilities": {"portMappings": true}}]}\n'


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(directory(), st.booleans(), st.booleans())
@example([('.10-hidden.conf', '{"name": "n", "type": "bridge", "ipMasq": true, "ipam": {"subnet": "10.1.0.0/24"}}')],
         False, False)
@example([('10-x.conf', '{"name": "n", "type": "bridge", "ipMasq": false, "ipMa\u017fq": true, '
                        '"ipam": {"subnet": "10.1.0.0/24"}}')], False, False)
@example([('10-flannel.conflist', FLANNEL_MANIFEST)], False, False)
@example([('10-flannel.conflist', FLANNEL_MANIFEST)], False, True)
def test_no_loaded_network_masquerades_a_family_we_manage(files_, ipv6, dual_flannel):
    _judge(files_, ipv6, dual_flannel)


# ---------------------------------------------------------------- the pieces

def test_go_folding_is_the_labs():
    rng = random.Random(7)
    for name in ('ipMasq', 'type', 'plugins', 'delegate', 'name', 'ipam', 'subnetFile'):
        for how_ in SPELLINGS:
            key = json.loads(spell(name, how_))
            assert (gojson.fold(key) == gojson.fold(name)) is (cni_runtime.go_fold(key) == cni_runtime.go_fold(name))
        for _n in range(50):
            key = ''.join(rng.choice([c, c.upper(), c.lower(), '\u017f', '\u212a', '\u00df', 'x']) for c in name)
            assert (gojson.fold(key) == gojson.fold(name)) is (cni_runtime.go_fold(key) == cni_runtime.go_fold(name))


@pytest.mark.parametrize('name,loaded', [
    ('.hidden.conf', True), ('.conf', True), ('a.conflist', True), ('a.json', True), ('a.CONF', False),
    ('a.conf.bak', False), ('a.json~', False), ('conf', False), ('a.conflists', False)])
def test_which_files_load(tmp_path, name, loaded):
    conf = tmp_path / CONF_DIR.lstrip('/')
    conf.mkdir(parents=True)
    (conf / name).write_text('{"name": "n", "type": "bridge", "ipMasq": true, "ipam": {"subnet": "10.1.0.0/24"}}')
    (conf / 'd.conf').mkdir()
    assert cni_runtime.conf_files(str(conf)) == ([str(conf / name)] if loaded else [])
    assert cni.conf_paths(files.Files(str(tmp_path)), [CONF_DIR]) == ([CONF_DIR + '/' + name] if loaded else [])


def test_flannel_delegate_gets_ipmasq_false_and_absent_undoes_it(tmp_path):
    conf = tmp_path / CONF_DIR.lstrip('/')
    conf.mkdir(parents=True)
    path = conf / '10-flannel.conflist'
    path.write_text(FLANNEL_MANIFEST)
    # Without flanneld's subnet file the families cannot be told: left on, and said.
    res = sync(str(tmp_path))
    assert res['changed'] is False and path.read_text() == FLANNEL_MANIFEST
    assert res['warnings'] and CONF_DIR + '/10-flannel.conflist' in res['warnings'][0], res
    env = tmp_path / SUBNET_ENV.lstrip('/')
    env.parent.mkdir(parents=True)
    env.write_text('FLANNEL_SUBNET=10.244.7.1/24\nFLANNEL_IPMASQ=false\n')
    res = sync(str(tmp_path))
    # The run that switches a network off says so in a warning naming the file (issue 32 item 13).
    assert res['changed'] and len(res['warnings']) == 1, res
    assert CONF_DIR + '/10-flannel.conflist: "ipMasq": false set in the delegate of flannel' in res['warnings'][0], res
    data = json.loads(path.read_text())
    assert data['plugins'][0]['delegate'] == {'hairpinMode': True, 'isDefaultGateway': True, 'ipMasq': False}
    assert cni_runtime.load(str(conf)) == {str(path): set()}
    assert sync(str(tmp_path))['changed'] is False
    sync(str(tmp_path), state='absent')
    assert path.read_text() == FLANNEL_MANIFEST


@pytest.mark.parametrize('plugin,delegate', [
    ('{"type": "flannel"}', {'ipMasq': False}),
    ('{"type": "flannel", "delegate": null}', {'ipMasq': False}),
    ('{"type": "flannel", "delegate": {}}', {'ipMasq': False}),
    ('{"type": "flannel", "delegate": {"ipMasq": true}}', {'ipMasq': False}),
    ('{"type": "flannel", "delegate": {"IPMASQ": true}}', {'IPMASQ': False, 'ipMasq': False}),
])
def test_flannel_delegate_shapes(plugin, delegate):
    text = '{"name": "cbr0", "plugins": [%s]}' % plugin
    net = cni.Network('/x/10.conflist', text)
    assert json.loads(net.switched_off(text))['plugins'][0]['delegate'] == delegate


def test_a_macvlan_delegate_is_left_alone():
    text = '{"name": "cbr0", "plugins": [{"type": "flannel", "delegate": {"type": "macvlan"}}]}'
    assert cni.Network('/x/10.conflist', text).edits == []


@pytest.mark.parametrize('ipam_text,families', [
    ('{"type": "host-local", "subnet": "10.1.0.0/24"}', {4}),
    ('{"type": "host-local", "ranges": [[{"subnet": "10.1.0.0/24"}], [{"subnet": "fd00::/64"}]]}', {4, 6}),
    ('{"type": "static", "addresses": [{"address": "fd00::2/64"}]}', {6}),
    ('{"type": "dhcp"}', {4}),
    ('{"type": "whereabouts", "range": "192.168.2.225-192.168.2.230/28"}', {4}),
    ('{"type": "magic"}', None),
])
def test_families_from_ipam(ipam_text, families):
    net = cni.Network('/x/n.conf', '{"name": "n", "type": "bridge", "ipMasq": true, "ipam": %s}' % ipam_text)
    assert net.families == families
    warning = net.uncovered(ipv6=False)
    if families is not None and families <= {4}:
        assert warning is None
    else:
        assert '/x/n.conf' in warning and 'set ip_masq_enable_ipv6: true (our policy then covers IPv6) or ' \
            'ip_masq_cni: skip' in warning.replace('Set', 'set')
    assert net.uncovered(ipv6=True) is None
