"""Unit tests of module_utils/_daemons: systemd unit and environment
file parsing, Go-flag search, byte-preserving edits, daemon.json as text, the
selection of Docker's and flannel's rules, and backups/restore on files in a
temporary root.  The modules themselves, on realistic trees and real
iptables, are tested in tests/integration/test_docker_flannel_kubelet.py."""
import json
import os
import types

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import parse_save
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import (
    backups, daemon_json, docker, envfile, files, flannel, goflags, kubelet, systemd, words,
)

d = types.SimpleNamespace()
for _module in (words, envfile, systemd, goflags, daemon_json, files, backups, docker, flannel, kubelet):
    for _name in dir(_module):
        if not _name.startswith('_'):
            setattr(d, _name, getattr(_module, _name))


def module_writer():
    """A real AnsibleModule's atomic_move and backup_local, as the modules use them."""
    with patch_module_args({}):
        return files.Writer(AnsibleModule(argument_spec={}, supports_check_mode=True))


def _with_writer(fn):
    def call(params, run, find, check_mode=False):
        return fn(params, run, find, module_writer(), check_mode=check_mode)
    return call


d.docker_sync = _with_writer(docker.docker_sync)
d.flannel_sync = _with_writer(flannel.flannel_sync)
d.kubelet_sync = _with_writer(kubelet.kubelet_sync)


def put(root, path, text, mode=0o644):
    real = os.path.join(str(root), path.lstrip('/'))
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, 'w') as f:
        f.write(text)
    os.chmod(real, mode)
    return real


def read(root, path):
    real = os.path.join(str(root), path.lstrip('/'))
    if not os.path.exists(real):
        return None
    with open(real) as f:
        return f.read()


def remove_every_ip_masq(files):
    """Remove flanneld.service's --ip-masq occurrences one edit at a time,
    re-reading the unit after each, as the module does."""
    for _i in range(10):
        unit = d.load_unit(files, 'flanneld.service', ['/etc/systemd/system'])
        commands, extra, _defs = d.command_lines(files, unit)
        occs = d.find_flag_all(commands, extra, 'ip-masq')
        if not occs:
            return
        d.remove_arg(files, occs[0])


def texts(words):
    return [w.text for w in words]


# ------------------------------------------------------------------ words

@pytest.mark.parametrize('value,want', [
    ('/usr/bin/dockerd -H fd:// --ip-masq', ['/usr/bin/dockerd', '-H', 'fd://', '--ip-masq']),
    ('/bin/x "a b" \'c d\' e\\ f', ['/bin/x', 'a b', 'c d', 'e f']),
    ('/bin/x --opt="quoted value" x"y"z', ['/bin/x', '--opt=quoted value', 'xyz']),
    ('/bin/x "say \\"hi\\""', ['/bin/x', 'say "hi"']),
    ('/bin/x \\\n  --a \\\n  --b', ['/bin/x', '--a', '--b']),
    ('/bin/x \\\n# a comment line\n  --a \\\n; another\n  --b', ['/bin/x', '--a', '--b']),
    ('-/bin/x $OPTS ${MORE}', ['-/bin/x', '$OPTS', '${MORE}']),
    ('', []),
])
def test_split_words(value, want):
    assert texts(d.split_words(value, 0, len(value))) == want


def test_split_words_raw_spans_point_at_the_bytes():
    text = 'ExecStart=/bin/x "--a=1 2" --b\n'
    words = d.split_words(text, 10, len(text) - 1)
    assert [text[w.start:w.end] for w in words] == ['/bin/x', '"--a=1 2"', '--b']
    assert words[1].sub(0, 3) == (text.index('--a'), text.index('--a') + 3)


def test_parse_unit_text_sections_and_continuations():
    text = ('[Unit]\nDescription=x\n\n[Service]\n# ExecStart=/commented\nExecStart=/bin/a \\\n'
            '# inside\n  --b \\\n  --c\nRestart=always\n[Install]\nWantedBy=multi-user.target\n')
    dirs = d.parse_unit_text(text)
    assert [(x.section, x.key) for x in dirs] == [('Unit', 'Description'), ('Service', 'ExecStart'),
                                                  ('Service', 'Restart'), ('Install', 'WantedBy')]
    exec_start = dirs[1]
    assert texts(d.split_words(text, exec_start.start, exec_start.end)) == ['/bin/a', '--b', '--c']
    assert text[exec_start.end:].startswith('\nRestart=')
    assert d.joined_value(text, exec_start) == '/bin/a --b --c'


# ------------------------------------------------------------------ env files

ENV = '''# comment
; also a comment
PLAIN=value
SPACED = spaced%s
DQ="a \\"b\\" $HOME"
SQ='it is \\n literal'
export EXPORTED="yes"
CONT=one\\
two
MULTI="line one
line two"
EMPTY=
   INDENTED=1
TRAIL="a b"  # a note, as the shell reads it
HASH=a#b
not an assignment
''' % '   '     # trailing blanks after "spaced", written this way to keep them visible


def test_parse_env_text_values():
    got = {a.key: a.value for a in d.parse_env_text(ENV)}
    assert got == {'PLAIN': 'value', 'SPACED': 'spaced', 'DQ': 'a "b" $HOME', 'SQ': 'it is \\n literal',
                   'EXPORTED': 'yes', 'CONT': 'onetwo', 'MULTI': 'line one\nline two', 'EMPTY': '', 'INDENTED': '1',
                   'TRAIL': 'a b', 'HASH': 'a#b'}


def test_parse_env_text_spans_and_quote_kind():
    for a in d.parse_env_text(ENV):
        raw = ENV[a.raw_start:a.raw_end]
        if a.key == 'DQ':
            assert a.quote == '"' and raw == '"a \\"b\\" $HOME"' and ENV[a.close] == '"'
        if a.key == 'SPACED':
            assert a.quote is None and raw == 'spaced'
    words = d.parse_env_text('X="--a  --b=1"\n')[0].words()
    assert [(w.text, w.start, w.end) for w in words] == [('--a', 3, 6), ('--b=1', 8, 13)]


def test_env_value_last_assignment_wins():
    assert d.env_value('A=1\nA=2\n', 'A') == '2'
    assert d.env_value(None, 'A') is None


# ------------------------------------------------------------------ units

def test_load_unit_priority_dropins_masking_and_resets(tmp_path):
    root = str(tmp_path)
    put(root, '/lib/systemd/system/x.service', '[Service]\nExecStart=/bin/lib\n')
    put(root, '/etc/systemd/system/x.service', '[Service]\nEnvironment=A=1 "B=two words"\n'
        'EnvironmentFile=-/etc/default/x\nExecStart=/bin/etc --a\n')
    put(root, '/lib/systemd/system/x.service.d/20-b.conf', '[Service]\nExecStart=\nExecStart=/bin/masked\n')
    put(root, '/etc/systemd/system/x.service.d/20-b.conf', '[Service]\nEnvironmentFile=\n')
    put(root, '/run/systemd/system/x.service.d/10-a.conf', '[Service]\nExecStart=\nExecStart=/bin/run $A $B\n')
    put(root, '/etc/systemd/system/x.service.d/30-c.conf.disabled', '[Service]\nExecStart=\n')
    os.makedirs(os.path.join(root, 'etc/systemd/system/x.service.d'), exist_ok=True)
    os.symlink('/dev/null', os.path.join(root, 'etc/systemd/system/x.service.d/40-off.conf'))
    put(root, '/lib/systemd/system/x.service.d/40-off.conf', '[Service]\nExecStart=\n')
    files = d.Files(root)
    unit = d.load_unit(files, 'x.service', d.DEFAULT_UNIT_DIRS)
    assert unit.fragment == '/etc/systemd/system/x.service'
    assert unit.dropins == ['/run/systemd/system/x.service.d/10-a.conf', '/etc/systemd/system/x.service.d/20-b.conf']
    assert len(unit.exec_starts) == 1 and texts(unit.exec_starts[0][1]) == ['/bin/run', '$A', '$B']
    assert unit.env_files == []
    commands, _extra, defs = d.command_lines(files, unit)
    assert [a.text for a in commands[0].args] == ['1', 'two', 'words']
    assert defs['B'].kind == 'environment'


def test_load_unit_symlinked_and_masked(tmp_path):
    root = str(tmp_path)
    put(root, '/lib/systemd/system/docker.service', '[Service]\nExecStart=/usr/bin/dockerd\n')
    os.makedirs(os.path.join(root, 'etc/systemd/system'))
    os.symlink('/lib/systemd/system/docker.service', os.path.join(root, 'etc/systemd/system/docker.service'))
    os.symlink('/dev/null', os.path.join(root, 'etc/systemd/system/flanneld.service'))
    files = d.Files(root)
    assert d.load_unit(files, 'docker.service', d.DEFAULT_UNIT_DIRS).fragment == '/lib/systemd/system/docker.service'
    assert d.load_unit(files, 'flanneld.service', d.DEFAULT_UNIT_DIRS).masked is True
    assert d.load_unit(files, 'kubelet.service', d.DEFAULT_UNIT_DIRS) is None


def test_env_files_override_environment_and_missing_required_file_is_reported(tmp_path):
    root = str(tmp_path)
    put(root, '/etc/systemd/system/x.service', '[Service]\nEnvironment=OPTS=--from-unit\n'
        'EnvironmentFile=/etc/sysconfig/x\nEnvironmentFile=/etc/missing\nExecStart=/bin/x $OPTS $$OPTS\n')
    put(root, '/etc/sysconfig/x', 'OPTS="--from-file --ip-masq"\n')
    files = d.Files(root)
    messages = []
    unit = d.load_unit(files, 'x.service', ['/etc/systemd/system'])
    commands, _e, _d = d.command_lines(files, unit, messages=messages)
    assert [(a.text, a.var, a.path) for a in commands[0].args] == [
        ('--from-file', 'OPTS', '/etc/sysconfig/x'), ('--ip-masq', 'OPTS', '/etc/sysconfig/x'),
        ('$OPTS', None, '/etc/systemd/system/x.service')]
    assert any('/etc/missing does not exist' in m for m in messages)


# ------------------------------------------------------------------ flags

def args_of(*words):
    return [d.Arg(w, '/f', 0, 0) for w in words]


@pytest.mark.parametrize('words,want', [
    (['--ip-masq'], [('--', None)]),
    (['-ip-masq'], [('-', None)]),
    (['--ip-masq=true', '-ip-masq=false'], [('--', 'true'), ('-', 'false')]),
    (['--ip-masq', 'false'], [('--', None)]),                 # a bool flag takes no separate value
    (['--ip-masquerade', '--no-ip-masq', 'ip-masq'], []),
    (['--', '--ip-masq'], []),
])
def test_find_bool_flag(words, want):
    assert [(o.dashes, o.value) for o in d.find_flag(args_of(*words), 'ip-masq')] == want


def test_find_flag_with_separate_value():
    occ = d.find_flag(args_of('--a', '--non-masquerade-cidr', '10.0.0.0/8', '--b'), 'non-masquerade-cidr', True)
    assert [(o.value, o.value_arg.text) for o in occ] == [('10.0.0.0/8', '10.0.0.0/8')]


@pytest.mark.parametrize('value,want', [
    (None, True), ('true', True), ('1', True), ('T', True), ('True', True), ('TRUE', True),
    ('false', False), ('0', False), ('f', False), ('FALSE', False), ('yes', None), ('', None)])
def test_bool_value_is_go_strconv(value, want):
    assert d.bool_value(value) is want


# ------------------------------------------------------------------ edits

@pytest.mark.parametrize('text,word,want', [
    ('E=/bin/x --b \\\n  --ip-masq "--c d"\n', '--ip-masq', 'E=/bin/x --b \\\n  "--c d"\n'),
    ('X="--b --ip-masq "\n', '--ip-masq', 'X="--b "\n'),
    ('X="--ip-masq "\n', '--ip-masq', 'X=" "\n'),
    ('ExecStart=/bin/x --ip-masq --b\n', '--ip-masq', 'ExecStart=/bin/x --b\n'),
    ('ExecStart=/bin/x --b --ip-masq\n', '--ip-masq', 'ExecStart=/bin/x --b\n'),
    ('X="--ip-masq --b"\n', '--ip-masq', 'X="--b"\n'),
    ('X="--b --ip-masq"\n', '--ip-masq', 'X="--b"\n'),
    ('X="--ip-masq"\n', '--ip-masq', 'X=""\n'),
    ('X=--ip-masq\n', '--ip-masq', 'X=\n'),
    ('E=/bin/x \\\n  --ip-masq \\\n  --b\n', '--ip-masq', 'E=/bin/x \\\n  --b\n'),
    ('E=/bin/x \\\n  --b \\\n  --ip-masq\nNext=1\n', '--ip-masq', 'E=/bin/x \\\n  --b\nNext=1\n'),
    ('E=/bin/x \\\n  --ip-masq --b \\\n  --c\n', '--ip-masq', 'E=/bin/x \\\n  --b \\\n  --c\n'),
    ('E=/bin/x \\\n  --b --ip-masq \\\n  --c\n', '--ip-masq', 'E=/bin/x \\\n  --b \\\n  --c\n'),
])
def test_removal_span(text, word, want):
    start = text.index(word)
    limit = text.rindex('"') if text.startswith('X="') else None
    s, e = d.removal_span(text, start, start + len(word), limit)
    assert text[:s] + text[e:] == want


def test_append_word_to_env_values(tmp_path):
    root = str(tmp_path)
    cases = {
        '/a': ('K=\n', 'K=--x=1\n'),
        '/b': ('K="--y"\n', 'K="--y --x=1"\n'),
        '/c': ("K='--y'\n", "K='--y --x=1'\n"),
        '/d': ('K=--y\n', 'K="--y --x=1"\n'),
        '/e': ('# c\nK=""   # trailing\n', '# c\nK="--x=1"   # trailing\n'),
    }
    for path, (before, _after) in cases.items():
        put(root, path, before)
    files = d.Files(root)
    for path, (before, after) in cases.items():
        a = d.parse_env_text(before, path)[-1]
        d.append_word(files, d.Definition('K', path, 'env_file', a.value, a.pos, assignment=a), '--x=1')
        assert files.read(path) == after, path


def test_environment_word_is_rewritten_quoted_when_needed(tmp_path):
    root = str(tmp_path)
    put(root, '/u', '[Service]\nEnvironment=K=--a OTHER=1\n')
    files = d.Files(root)
    w = d.split_words(files.read('/u'), 22, 34)[0]
    d.append_word(files, d.Definition('K', '/u', 'environment', '--a', w.pos[2:], word=w), '--x=1')
    assert files.read('/u') == '[Service]\nEnvironment="K=--a --x=1" OTHER=1\n'


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.from_regex(r'--[a-z]{1,8}(=[a-z0-9./]{1,6})?', fullmatch=True), min_size=0, max_size=6),
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from(['--ip-masq', '-ip-masq', '--ip-masq=true',
                                                           '-ip-masq=1', '"--ip-masq"'])), max_size=3),
    st.lists(st.sampled_from([' ', '  ', ' \\\n  ', '\t', ' \\\n# note\n    ']), min_size=12, max_size=12),
)
# Found by hypothesis: a flag alone on the last continued line, followed by a quoted word.
@example(others=['--a', '--a'], flags=[(0, '--ip-masq'), (2, '--ip-masq'), (3, '"--ip-masq"')],
         seps=[' ', ' ', ' ', ' \\\n  '] + [' '] * 8)
def test_removing_the_flag_keeps_every_other_word(tmp_path_factory, others, flags, seps):
    """Whatever the layout, removing every --ip-masq leaves exactly the other
    words, in order, and a file systemd still parses to that command line."""
    words = list(others)
    for pos, flag in sorted(flags, reverse=True):
        words.insert(min(pos, len(words)), flag)
    line = '/opt/bin/flanneld'
    for i, w in enumerate(words):
        line += seps[i % len(seps)] + w
    text = '[Service]\nExecStart=%s\nRestart=always\n' % line
    root = str(tmp_path_factory.mktemp('prop'))
    put(root, '/etc/systemd/system/flanneld.service', text)
    files = d.Files(root)
    remove_every_ip_masq(files)
    unit = d.load_unit(files, 'flanneld.service', ['/etc/systemd/system'])
    assert [a.text for a in d.command_lines(files, unit)[0][0].args] == others
    after = files.read('/etc/systemd/system/flanneld.service')
    assert after.endswith('\nRestart=always\n') and after.startswith('[Service]\nExecStart=/opt/bin/flanneld')
    if not flags:
        assert after == text


# ------------------------------------------------------------------ daemon.json

@pytest.mark.parametrize('before,after', [
    ('{}', '{\n    "ip-masq": false\n}\n'),
    ('{ }\n', '{\n    "ip-masq": false\n}\n'),
    ('{"a": 1}', '{"a": 1, "ip-masq": false}\n'),
    ('{"a":1,"b":2}', '{"a":1,"b":2,"ip-masq":false}\n'),
    ('{\n\t"a": {\n\t\t"x": 1\n\t}\n}\n', '{\n\t"a": {\n\t\t"x": 1\n\t},\n\t"ip-masq": false\n}\n'),
    ('{\n  "ip-masq": true,\n  "b": 2\n}\n', '{\n  "ip-masq": false,\n  "b": 2\n}\n'),
    ('{"ip-masq": true, "ip-masq": true}', '{"ip-masq": false, "ip-masq": false}\n'),
    ('\ufeff{"a": 1}\n', '\ufeff{"a": 1, "ip-masq": false}\n'),
    ('{"ip-masq": false}', '{"ip-masq": false}'),     # already right: not even a newline added
])
def test_json_set(before, after):
    assert d.json_set(before, '/d.json', 'ip-masq', 'false') == after
    data = json.loads(after.lstrip('\ufeff'))
    assert data['ip-masq'] is False


@pytest.mark.parametrize('before,after', [
    ('{"ip-masq": true}', '{}\n'),
    ('{\n  "ip-masq": true,\n  "b": 2\n}\n', '{\n  "b": 2\n}\n'),
    ('{\n  "a": 1,\n  "ip-masq": true\n}\n', '{\n  "a": 1\n}\n'),
    ('{\n  "a": 1,\n  "ip-masq": true,\n  "b": [1, 2]\n}\n', '{\n  "a": 1,\n  "b": [1, 2]\n}\n'),
    ('{"ip-masq": 1, "a": 2, "ip-masq": 3}', '{"a": 2}\n'),
    ('{"a": 1}', '{"a": 1}'),
])
def test_json_remove(before, after):
    assert d.json_remove(before, '/d.json', 'ip-masq') == after
    json.loads(after)


@pytest.mark.parametrize('text,fragment', [
    ('{\n  # comment\n}', 'line 2, column 3'),
    ('{"a": 1,}', 'line 1, column 9'),
    ('[]', 'not a list'),
    ('"x"', 'not a str'),
    ('{"a": NaN', 'line 1'),
])
def test_parse_daemon_json_errors_name_file_and_position(text, fragment):
    with pytest.raises(MasqError) as e:
        d.parse_daemon_json(text, '/etc/docker/daemon.json')
    assert '/etc/docker/daemon.json' in e.value.msg and fragment in e.value.msg, e.value.msg


# ------------------------------------------------------------------ rules

SAVE = '''# Generated by iptables-save v1.8.9 (nf_tables) on Sat Nov 21 10:00:00 2026
*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
:FLANNEL-POSTRTG - [0:0]
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s 172.19.0.0/16 ! -o br-0a1b2c3d4e5f -j MASQUERADE
-A POSTROUTING -o docker0 -m addrtype --src-type LOCAL -j MASQUERADE
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -p tcp -j MASQUERADE
-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG
-A POSTROUTING -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j RETURN
-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully
COMMIT
'''


def lines(rules):
    return [r.line for r in rules]


def test_docker_bridge_rules_exact_shapes_only():
    table = parse_save(SAVE)
    assert list(table.chains) == ['PREROUTING', 'POSTROUTING', 'DOCKER', 'FLANNEL-POSTRTG']
    want = ['-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE',
            '-A POSTROUTING -o docker0 -m addrtype --src-type LOCAL -j MASQUERADE']
    assert lines(d.docker_bridge_rules(table, 'docker0', None)) == want
    import ipaddress
    assert lines(d.docker_bridge_rules(table, 'docker0', [ipaddress.ip_network('172.17.0.0/16')])) == want
    assert lines(d.docker_bridge_rules(table, 'docker0', [ipaddress.ip_network('172.18.0.0/16')])) == want[1:]
    assert d.docker_bridge_rules(table, 'br0', None) == []


def test_flannel_rules_and_foreign_jump():
    table = parse_save(SAVE)
    got, drop = d.flannel_rules(table, 4)
    assert lines(got) == ['-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG',
                          '-A POSTROUTING -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j RETURN']
    assert drop == ['FLANNEL-POSTRTG']
    with pytest.raises(MasqError) as e:
        d.flannel_rules(parse_save(SAVE.replace('COMMIT', ':MINE - [0:0]\n-A MINE -j FLANNEL-POSTRTG\nCOMMIT')), 4)
    assert '-A MINE -j FLANNEL-POSTRTG' in e.value.msg


# ------------------------------------------------------------------ whole flows on a tree (no iptables)

def no_run(argv, data=None):
    raise AssertionError('nothing should be run: %r' % (argv,))


def no_find(_name):
    return None


def params(root, **kw):
    p = {'state': 'present', 'root': str(root), 'unit_dirs': list(d.DEFAULT_UNIT_DIRS), 'env_files': [],
         'backup_dir': d.DEFAULT_BACKUP_DIR, 'backup': True}
    p.update(kw)
    return p


def docker_params(root, **kw):
    base = {'unit_name': 'docker.service', 'daemon_json': '/etc/docker/daemon.json', 'remove_stale_rules': False,
            'report_networks': False, 'docker_bin': None, 'bridge_name': None, 'bridge_cidrs': None}
    base.update(kw)
    return params(root, **base)


def test_docker_check_mode_writes_nothing_and_reports_the_diff(tmp_path):
    put(tmp_path, '/lib/systemd/system/docker.service', '[Service]\nExecStart=/usr/bin/dockerd -H fd://\n')
    put(tmp_path, '/etc/docker/daemon.json', '{"debug": true}\n')
    res = d.docker_sync(docker_params(tmp_path), no_run, no_find, check_mode=True)
    assert res['changed'] is True and res['edited'] == ['/etc/docker/daemon.json'] and res['backups'] == []
    assert res.diff == [{'before_header': '/etc/docker/daemon.json', 'after_header': '/etc/docker/daemon.json',
                         'before': '{"debug": true}\n', 'after': '{"debug": true, "ip-masq": false}\n'}]
    assert read(tmp_path, '/etc/docker/daemon.json') == '{"debug": true}\n'
    assert not os.path.exists(os.path.join(str(tmp_path), 'var'))


def test_docker_config_file_flag_is_followed(tmp_path):
    put(tmp_path, '/etc/systemd/system/docker.service',
        '[Service]\nExecStart=/usr/bin/dockerd --config-file /srv/docker/conf.json\n')
    put(tmp_path, '/srv/docker/conf.json', '{}')
    res = d.docker_sync(docker_params(tmp_path), no_run, no_find)
    assert res['daemon_json'] == '/srv/docker/conf.json'
    assert json.loads(read(tmp_path, '/srv/docker/conf.json')) == {'ip-masq': False}
    assert read(tmp_path, '/etc/docker/daemon.json') is None


def test_backup_keeps_the_first_original_and_a_newer_user_version(tmp_path):
    put(tmp_path, '/lib/systemd/system/docker.service', '[Service]\nExecStart=/usr/bin/dockerd\n')
    put(tmp_path, '/etc/docker/daemon.json', '{"ip-masq": true}\n')
    d.docker_sync(docker_params(tmp_path), no_run, no_find)
    stored = '/var/lib/ipmasq-agent/backup/etc/docker/daemon.json'
    assert read(tmp_path, stored) == '{"ip-masq": true}\n'
    rec = json.loads(read(tmp_path, stored + '.ipmasq-agent.json'))
    assert rec['owners'] == ['docker'] and rec['existed'] is True and rec['mode'] == 0o644
    # A second run changes nothing and keeps the first original.
    res = d.docker_sync(docker_params(tmp_path), no_run, no_find)
    assert res['changed'] is False and read(tmp_path, stored) == '{"ip-masq": true}\n'
    # The user puts ip-masq back and adds a key: that version becomes the one to restore.
    put(tmp_path, '/etc/docker/daemon.json', '{"ip-masq": true, "debug": true}\n')
    d.docker_sync(docker_params(tmp_path), no_run, no_find)
    assert read(tmp_path, stored) == '{"ip-masq": true, "debug": true}\n'
    d.docker_sync(docker_params(tmp_path, state='absent'), no_run, no_find)
    assert read(tmp_path, '/etc/docker/daemon.json') == '{"ip-masq": true, "debug": true}\n'
    assert not os.path.exists(os.path.join(str(tmp_path), stored.lstrip('/')))


def flannel_params(root, **kw):
    base = {'unit_name': 'flanneld.service', 'mk_docker_opts': ['/usr/libexec/flannel/mk-docker-opts.sh'],
            'subnet_env': '/run/flannel/subnet.env', 'remove_stale_rules': False}
    base.update(kw)
    return params(root, **base)


def test_flannel_absent_leaves_a_file_changed_since_with_a_warning(tmp_path):
    unit = '[Service]\nExecStart=/opt/bin/flanneld --ip-masq --kube-subnet-mgr\n'
    put(tmp_path, '/etc/systemd/system/flanneld.service', unit)
    d.flannel_sync(flannel_params(tmp_path), no_run, no_find)
    changed = '[Service]\nExecStart=/opt/bin/flanneld --kube-subnet-mgr --iface=eth1\n'
    put(tmp_path, '/etc/systemd/system/flanneld.service', changed)
    for _i in range(2):
        res = d.flannel_sync(flannel_params(tmp_path, state='absent'), no_run, no_find)
        assert res['changed'] is False and any('left as it is' in w for w in res.warnings)
        assert read(tmp_path, '/etc/systemd/system/flanneld.service') == changed


def test_flannel_mk_docker_opts_only_the_top_level_default(tmp_path):
    put(tmp_path, '/etc/systemd/system/flanneld.service', '[Service]\nExecStart=/opt/bin/flanneld\n')
    script = '#!/bin/sh\nipmasq=true\ncase $opt in\n  m)\n    ipmasq=false\n    ;;\nesac\n'
    put(tmp_path, '/usr/libexec/flannel/mk-docker-opts.sh', script, mode=0o755)
    res = d.flannel_sync(flannel_params(tmp_path), no_run, no_find)
    assert read(tmp_path, '/usr/libexec/flannel/mk-docker-opts.sh') == script.replace('\nipmasq=true\n', '\nipmasq=false\n')
    assert os.stat(os.path.join(str(tmp_path), 'usr/libexec/flannel/mk-docker-opts.sh')).st_mode & 0o777 == 0o755
    assert res['edited'] == ['/usr/libexec/flannel/mk-docker-opts.sh']


def kubelet_params(root, **kw):
    base = {'unit_name': 'kubelet.service', 'mode': 'set', 'extra_args_var': 'KUBELET_EXTRA_ARGS',
            'kubelet_bin': None}
    base.update(kw)
    return params(root, **base)


def kubelet_run(version):
    def run(argv, data=None):
        assert argv[-1] == '--version'
        return 0, 'Kubernetes %s\n' % version, ''
    return run


def test_kubelet_refuses_when_a_later_dropin_would_override_ours(tmp_path):
    put(tmp_path, '/lib/systemd/system/kubelet.service', '[Service]\nExecStart=/usr/bin/kubelet\n')
    put(tmp_path, '/usr/bin/kubelet', '#!/bin/sh\n', mode=0o755)
    put(tmp_path, '/etc/systemd/system/kubelet.service.d/99-local.conf',
        '[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --v=2\n')
    before = sorted(os.walk(str(tmp_path)))
    with pytest.raises(MasqError) as e:
        d.kubelet_sync(kubelet_params(tmp_path), kubelet_run('v1.22.3'), no_find)
    assert 'would not take effect' in e.value.msg
    assert sorted(os.walk(str(tmp_path))) == before


def test_relative_paths_are_refused(tmp_path):
    with pytest.raises(MasqError) as e:
        d.docker_sync(docker_params(tmp_path, unit_dirs=['etc/systemd']), no_run, no_find)
    assert "unit_dirs: 'etc/systemd' is not an absolute path" in e.value.msg


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.from_regex(r'-{1,2}[a-z]{1,8}(=[a-z0-9./]{1,6})?', fullmatch=True), min_size=0, max_size=6),
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from(['--ip-masq', '-ip-masq', '--ip-masq=true', '-ip-masq=T'])),
             max_size=3),
    st.lists(st.integers(0, 3), min_size=14, max_size=14),
    st.sampled_from(['"', "'"]),
)
def test_removing_the_flag_from_an_env_file_keeps_every_other_word(tmp_path_factory, others, flags, seps, quote):
    """The same for options in a quoted EnvironmentFile= variable, as
    FLANNEL_OPTIONS="..." or DOCKER_OPTS='...' are written (a backslash-newline
    continues a double-quoted value only)."""
    blanks = [' ', '  ', '\t', ' \\\n  ' if quote == '"' else ' ']
    words = list(others)
    for pos, flag in sorted(flags, reverse=True):
        words.insert(min(pos, len(words)), flag)
    value = blanks[seps[0]] if words else ''
    for i, w in enumerate(words):
        value += w + blanks[seps[i + 1]]
    text = '# options\nFLANNEL_OPTIONS=%s%s%s\nOTHER=1\n' % (quote, value, quote)
    root = str(tmp_path_factory.mktemp('prop'))
    put(root, '/etc/systemd/system/flanneld.service',
        '[Service]\nEnvironmentFile=/etc/sysconfig/flanneld\nExecStart=/usr/bin/flanneld-start $FLANNEL_OPTIONS\n')
    put(root, '/etc/sysconfig/flanneld', text)
    files = d.Files(root)
    remove_every_ip_masq(files)
    unit = d.load_unit(files, 'flanneld.service', ['/etc/systemd/system'])
    after = files.read('/etc/sysconfig/flanneld')
    assert [a.text for a in d.command_lines(files, unit)[0][0].args] == others, after
    assert after.startswith('# options\nFLANNEL_OPTIONS=' + quote) and after.endswith(quote + '\nOTHER=1\n')
    if not flags:
        assert after == text
