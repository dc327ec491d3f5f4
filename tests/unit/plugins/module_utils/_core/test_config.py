"""The agent config file reader (module_utils/_core/upstream_config/config.py, yamlsubset.py and
golang.py) against every form
of the upstream config file: the seeds' JSON and YAML, capitalised keys, Go
durations, missing, empty and invalid files, wrong types, unknown keys.  The
expected values come from the upstream agent's behaviour (Go's time package,
encoding/json and go-yaml v2), not from the code under test."""
import os
import types

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config import config, golang, yamlsubset
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import errors
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


def _load_config(path):
    """What a resync cycle does with the file: missing means the defaults."""
    text = config.read_config(path)
    if text is None:
        return config.defaults(), [], None
    settings, warnings = config.parse_config(text)
    return settings, warnings, text


c = types.SimpleNamespace(
    ConfigError=errors.ConfigError, MAX_CONFIG_BYTES=config.MAX_CONFIG_BYTES, Pairs=yamlsubset.Pairs,
    format_go_duration=golang.format_duration, load_config=_load_config, load_yaml=yamlsubset.load_yaml,
    parse_config=config.parse_config, parse_go_duration=golang.parse_duration,
    parse_go_duration_ns=golang.parse_duration_ns, render_config=config.render_config)

DEFAULTS = {
    'nonmasquerade_cidrs': ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'],
    'masq_link_local': False,
    'masq_link_local_ipv6': False,
    'cidr_limit': 64,
    'resync_interval': '1m0s',
}


def parse(text, **kwargs):
    return c.parse_config(text, **kwargs)


def settings_of(text, **kwargs):
    got, _warnings = parse(text, **kwargs)
    return got


def expect(**changes):
    want = dict(DEFAULTS)
    want.update(changes)
    return want


def refused(text, *fragments, **kwargs):
    with pytest.raises(c.ConfigError) as e:
        parse(text, **kwargs)
    for fragment in fragments:
        assert fragment in e.value.msg, e.value.msg
    return e.value


# ------------------------------------------------------------ the seeds' forms

def test_seed_000_json_with_capitalised_keys():
    text = '{"NonMasqueradeCIDRs":["172.16.0.0/16","10.168.0.0/16"],"MasqLinkLocal":true,"ResyncInterval":"1m0s"}'
    assert parse(text) == (expect(nonmasquerade_cidrs=['172.16.0.0/16', '10.168.0.0/16'],
                                  masq_link_local=True), [])


def test_seed_001_yaml():
    text = 'nonMasqueradeCIDRs:\n  - 10.0.0.0/8\nresyncInterval: 60s\nmasqLinkLocal: true\n'
    assert parse(text) == (expect(nonmasquerade_cidrs=['10.0.0.0/8'], masq_link_local=True), [])


def test_the_roles_template_output():
    text = ('# Ansible managed\n# The Kubernetes ip-masq-agent config schema\nnonMasqueradeCIDRs:\n'
            '  - 10.0.0.0/8\n  - 2001:db8::/32\n  - ::/0\nmasqLinkLocal: false\nmasqLinkLocalIPv6: true\n'
            'resyncInterval: 1m30s\ncidrLimit: 10\n')
    assert settings_of(text, ipv6=True) == expect(
        nonmasquerade_cidrs=['10.0.0.0/8', '2001:db8::/32', '::/0'], masq_link_local_ipv6=True,
        resync_interval='1m30s', cidr_limit=10)


@pytest.mark.parametrize('text', [
    '{"nonMasqueradeCIDRs": ["10.0.0.0/8"], "masqLinkLocal": true, "resyncInterval": "60s"}',
    '\n  \t{\n  "nonMasqueradeCIDRs": [\n    "10.0.0.0/8"\n  ],\n  "masqLinkLocal": true\n}\n',
    '\ufeff{"nonMasqueradeCIDRs": ["10.0.0.0/8"], "masqLinkLocal": true}',
    'nonMasqueradeCIDRs: [10.0.0.0/8]\nmasqLinkLocal: true\n',
    'nonMasqueradeCIDRs: ["10.0.0.0/8"]\nmasqLinkLocal: yes\n',
    "nonMasqueradeCIDRs: ['10.0.0.0/8']   # a comment\nmasqLinkLocal: on\n",
    'nonMasqueradeCIDRs:\n- 10.0.0.0/8\nmasqLinkLocal: True\n',
    'nonMasqueradeCIDRs:\n    -   "10.0.0.0/8"   # pods\nmasqLinkLocal: TRUE\n',
    '---\n# the cluster\nnonMasqueradeCIDRs: [\n  10.0.0.0/8,  # pods\n]\nmasqLinkLocal: y\n...\n',
    'nonMasqueradeCIDRs:\r\n  - 10.0.0.0/8\r\nmasqLinkLocal: true\r\n',
    '  nonMasqueradeCIDRs:\n    - 10.0.0.0/8\n  masqLinkLocal: true\n',
    '"nonMasqueradeCIDRs":\n  - 10.0.0.0/8\n\'masqLinkLocal\': true\n',
    'NONMASQUERADECIDRS: [10.0.0.0/8]\nmasqlinklocal: true\n',
    'nonmasqueradecidrs: [ 10.0.0.0/8 ]\nMasqLinkLocal: true\n',
    '{"NONMASQUERADECIDRS": ["10.0.0.0/8"], "masqlinklocal": true}',
    '# JSON after a comment is YAML flow, as go-yaml reads it\n{"nonMasqueradeCIDRs": ["10.0.0.0/8"],\n'
    '\t"masqLinkLocal": true}\n',
    '# comment\n{\n  "nonMasqueradeCIDRs": [\n    "10.0.0.0/8"\n  ],\n  "masqLinkLocal": true\n}\n',
    'nonMasqueradeCIDRs:\n  - "\\x31\\u0030.0.0.0/8"\nmasqLinkLocal: true\n',
])
def test_every_way_to_write_the_same_config(text):
    assert settings_of(text) == expect(nonmasquerade_cidrs=['10.0.0.0/8'], masq_link_local=True)


@pytest.mark.parametrize('text', ['', '\n\n', '   \n', '# only a comment\n', '---\n', '---\n# nothing\n...\n', '{}',
                                  '  {  }  ', '~\n', 'null\n'])
def test_empty_documents_mean_the_defaults(text):
    # Upstream: YAMLToJSON("") is "null"; decoding null into the struct changes nothing.
    assert parse(text) == (DEFAULTS, [])


# ------------------------------------------------------------ the file

def test_missing_file_means_the_defaults(tmp_path):
    assert c.load_config(str(tmp_path / 'config')) == (DEFAULTS, [], None)


def test_dangling_symlink_is_a_missing_file(tmp_path):
    os.symlink(str(tmp_path / 'nowhere'), str(tmp_path / 'config'))
    assert c.load_config(str(tmp_path / 'config')) == (DEFAULTS, [], None)


def test_file_is_read(tmp_path):
    path = tmp_path / 'config'
    path.write_text('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n')
    settings, warnings, text = c.load_config(str(path))
    assert settings == expect(nonmasquerade_cidrs=['10.0.0.0/8'])
    assert warnings == [] and text == path.read_text()


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(c.ConfigError, match='cannot be read'):
        c.load_config(str(tmp_path))


def test_not_utf8_is_refused_with_its_line(tmp_path):
    path = tmp_path / 'config'
    path.write_bytes(b'nonMasqueradeCIDRs:\n  - 10.0.0.0/8\xff\n')
    with pytest.raises(c.ConfigError, match='line 2: the file is not UTF-8'):
        c.load_config(str(path))


def test_a_huge_file_is_refused(tmp_path):
    path = tmp_path / 'config'
    path.write_text('# x\n' * (c.MAX_CONFIG_BYTES // 4 + 1))
    with pytest.raises(c.ConfigError, match='larger than'):
        c.load_config(str(path))


# ------------------------------------------------------------ values and types

@pytest.mark.parametrize('word,value', [
    ('true', True), ('True', True), ('TRUE', True), ('yes', True), ('Yes', True), ('on', True), ('ON', True),
    ('y', True), ('Y', True), ('false', False), ('no', False), ('off', False), ('n', False), ('N', False),
    ('Off', False), ('NO', False),
])
def test_yaml_1_1_booleans_as_go_yaml_v2(word, value):
    assert settings_of('masqLinkLocal: %s\nmasqLinkLocalIPv6: %s\n' % (word, word)) == expect(
        masq_link_local=value, masq_link_local_ipv6=value)


@pytest.mark.parametrize('literal,value', [
    ('64', 64), ('+64', 64), ('0x40', 64), ('0X40', 64), ('0o100', 64), ('0100', 64), ('0b1000000', 64),
    ('6_4', 64), ('64.0', 64), ('6.4e1', 64), ('09', 9), ('0', 0),
])
def test_yaml_integers_for_cidr_limit(literal, value):
    text = 'cidrLimit: %s\nnonMasqueradeCIDRs: []\n' % literal
    assert settings_of(text) == expect(cidr_limit=value, nonmasquerade_cidrs=[])


@pytest.mark.parametrize('text,fragment', [
    ('cidrLimit: "64"\n', 'must be a whole number, not the string "64"'),
    ('cidrLimit: 64.5\n', 'must be a whole number, not the number 64.5'),
    ('cidrLimit: true\n', 'must be a whole number, not the boolean true'),
    ('cidrLimit: [64]\n', 'must be a whole number, not a list'),
    ('cidrLimit: .inf\n', 'must be a whole number'),
    ('cidrLimit: -1\n', 'must not be negative'),
    ('cidrLimit: 9223372036854775808\n', 'out of range'),
    ('{"cidrLimit": 64.0}', 'must be a whole number, not the number 64.0'),
    ('{"cidrLimit": 1e2}', 'must be a whole number'),
])
def test_bad_cidr_limit(text, fragment):
    refused(text, 'cidrLimit', fragment)


def test_null_leaves_bools_and_the_limit_at_their_defaults():
    assert parse('masqLinkLocal:\nmasqLinkLocalIPv6: ~\ncidrLimit: null\n') == (DEFAULTS, [])


def test_null_cidr_list_means_an_empty_list_with_a_warning():
    # Go's json decodes null into a slice as nil: no CIDR at all, as upstream.
    settings, warnings = parse('nonMasqueradeCIDRs:\n')
    assert settings == expect(nonmasquerade_cidrs=[])
    assert len(warnings) == 1 and 'is null' in warnings[0] and 'line 1' in warnings[0]


def test_explicit_empty_list_is_no_cidr_and_no_warning():
    assert parse('nonMasqueradeCIDRs: []\n') == (expect(nonmasquerade_cidrs=[]), [])


@pytest.mark.parametrize('text,fragment', [
    ('nonMasqueradeCIDRs: 10.0.0.0/8\n', 'must be a list of CIDR strings, not the string "10.0.0.0/8"'),
    ('nonMasqueradeCIDRs: {a: 1}\n', 'must be a list of CIDR strings, not a mapping'),
    ('nonMasqueradeCIDRs: [10.0.0.0/8, 42]\n', 'entry 2 is the number 42'),
    ('nonMasqueradeCIDRs: [10.0.0.0/8, ~]\n', 'entry 2 is null'),
    ('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - [172.16.0.0/12]\n', 'entry 2 is a list'),
    ('{"nonMasqueradeCIDRs": "10.0.0.0/8"}', 'not the string'),
    ('masqLinkLocal: "true"\n', 'must be true or false, not the string "true" (remove the quotes)'),
    ('masqLinkLocal: 1\n', 'must be true or false, not the number 1'),
    ('masqLinkLocalIPv6: enabled\n', 'must be true or false, not the string "enabled"'),
    ('{"masqLinkLocal": "yes"}', 'must be true or false'),
    ('resyncInterval: 60\n', 'must be a string holding a Go duration'),
    ('resyncInterval:\n', 'not null'),
    ('{"resyncInterval": 60000000000}', 'must be a string holding a Go duration'),
    ('resyncInterval: ""\n', 'is not a Go duration'),
    ('resyncInterval: 1d\n', 'unknown unit "d"'),
    ('resyncInterval: 60 s\n', 'unknown unit " s"'),
    ('resyncInterval: "60"\n', 'missing unit'),
    ('resyncInterval: -5s\n', 'is not a positive duration'),
    ('resyncInterval: 0s\n', 'is not a positive duration'),
    ('resyncInterval: "0"\n', 'is not a positive duration'),
])
def test_wrong_types_and_values_are_refused(text, fragment):
    refused(text, fragment)


def test_errors_name_the_line():
    e = refused('# header\nnonMasqueradeCIDRs:\n  - 10.0.0.0/8\nmasqLinkLocal: "no"\n', 'masqLinkLocal (line 4)')
    assert e.line == 4


@pytest.mark.parametrize('duration,normalised', [
    ('60s', '1m0s'), ('1m0s', '1m0s'), ('500ms', '500ms'), ('1h2m3s', '1h2m3s'), ('1.5h', '1h30m0s'),
    ('30s', '30s'), ('.5s', '500ms'), ('1.s', '1s'), ('+90s', '1m30s'), ('1h0m0.001s', '1h0m0.001s'),
    (u'1500\u00b5s', '1.5ms'), (u'1500\u03bcs', '1.5ms'), ('1500us', '1.5ms'), ('2000000ns', '2ms'),
])
def test_resync_interval_go_durations(duration, normalised):
    assert settings_of('resyncInterval: "%s"\n' % duration)['resync_interval'] == normalised
    assert settings_of('{"resyncInterval": "%s"}' % duration)['resync_interval'] == normalised


# ------------------------------------------------------------ CIDRs (the core validates them)

def test_cidrs_are_normalised_and_order_kept():
    assert settings_of('nonMasqueradeCIDRs: [192.168.0.0/16,  10.0.0.0/8 , 2001:DB8::/32]\n', ipv6=True)[
        'nonmasquerade_cidrs'] == ['192.168.0.0/16', '10.0.0.0/8', '2001:db8::/32']


def test_duplicates_give_one_entry_and_a_warning():
    settings, warnings = parse('nonMasqueradeCIDRs: [10.0.0.0/8, 10.0.0.0/8, 172.16.0.0/12]\n')
    assert settings['nonmasquerade_cidrs'] == ['10.0.0.0/8', '172.16.0.0/12']
    assert warnings == ['nonMasqueradeCIDRs (line 1) lists 10.0.0.0/8 2 times; one rule is written.']


@pytest.mark.parametrize('entry,fragment', [
    ('10.0.0.1/8', 'not aligned to a CIDR block: it has host bits set (did you mean 10.0.0.0/8?)'),
    ('10.0.0.1', 'is an address, not a CIDR (write 10.0.0.1/32'),
    ('10.0.0.0/33', 'is not a CIDR'),
    ('ten.0.0.0/8', 'is not a CIDR'),
    ('""', 'an empty entry'),
])
def test_bad_cidrs_are_refused_with_the_cores_reason(entry, fragment):
    e = refused('nonMasqueradeCIDRs:\n  - 172.16.0.0/12\n  - %s\n' % entry, 'nonMasqueradeCIDRs (line 1)', fragment)
    assert 'Nothing was changed' not in e.msg


def test_ipv6_cidr_needs_enable_ipv6():
    refused('nonMasqueradeCIDRs: [10.0.0.0/8, "fd00:10::/48"]\n',
            'fd00:10::/48 is IPv6 but IPv6 is not enabled', '--enable-ipv6', 'ip_masq_enable_ipv6')
    assert settings_of('nonMasqueradeCIDRs: [10.0.0.0/8, "fd00:10::/48"]\n', ipv6=True)[
        'nonmasquerade_cidrs'] == ['10.0.0.0/8', 'fd00:10::/48']


def test_cidr_limit_is_enforced():
    cidrs = ['10.%d.0.0/16' % n for n in range(5)]
    text = 'cidrLimit: 4\nnonMasqueradeCIDRs: [%s]\n' % ', '.join(cidrs)
    refused(text, '5 CIDRs', 'over cidrLimit 4')
    assert settings_of(text.replace('cidrLimit: 4', 'cidrLimit: 5'))['nonmasquerade_cidrs'] == cidrs
    refused('nonMasqueradeCIDRs: [%s]\n' % ', '.join('10.%d.0.0/16' % n for n in range(65)), 'over cidrLimit 64')


# ------------------------------------------------------------ keys

def test_unknown_keys_are_ignored_with_a_warning_naming_them():
    text = ('nonMasqueradeCIDRs: [10.0.0.0/8]\nenable-ipv6: true\nmasq_link_local: true\nfoo:\n  bar: [1, 2]\n'
            '  baz:\n    - x: 1\n      y: {a: b}\n')
    settings, warnings = parse(text)
    assert settings == expect(nonmasquerade_cidrs=['10.0.0.0/8'])
    assert len(warnings) == 3
    assert '"enable-ipv6" (line 2)' in warnings[0] and 'agent flag --enable-ipv6' in warnings[0]
    assert '"masq_link_local" (line 3)' in warnings[1] and 'did you mean masqLinkLocal?' in warnings[1]
    assert '"foo" (line 4)' in warnings[2] and 'the keys are nonMasqueradeCIDRs' in warnings[2]


def test_unknown_key_in_json_names_its_line():
    _settings, warnings = parse('{\n  "nonMasqueradeCIDRs": [],\n  "enableIPv6": true\n}\n')
    assert warnings[-1].startswith('unknown key "enableIPv6" (line 3)')


@pytest.mark.parametrize('text', [
    'resyncInterval: 5s\nResyncInterval: 30s\n',
    '{"resyncInterval": "5s", "RESYNCINTERVAL": "30s"}',
])
def test_a_key_given_twice_warns_and_the_last_wins(text):
    settings, warnings = parse(text)
    assert settings['resync_interval'] == '30s'
    assert len(warnings) == 1 and 'more than once' in warnings[0]


# ------------------------------------------------------------ what is not read

@pytest.mark.parametrize('text,line,fragment', [
    ('nonMasqueradeCIDRs:\n\t- 10.0.0.0/8\n', 2, 'a tab in the indentation'),
    ('a: 1\n\tb: 2\n', 2, 'a tab in the indentation'),
    ('\ta: 1\n', 1, 'a tab in the indentation'),
    ('a:\n  - 1\n \t- 2\n', 3, 'a tab in the indentation'),
    ('masqLinkLocal: "true\n', 1, 'does not end on its line'),
    ('a: !!str 1\n', 1, 'tags'),
    ('a: |\n  text\n', 1, 'block scalars'),
    ('a: >\n  text\n', 1, 'block scalars'),
    ('%YAML 1.1\n---\na: 1\n', 1, 'directives'),
    ('a: b: c\n', 1, 'a "key: value" inside a value'),
    ('nonMasqueradeCIDRs: 10.0.0.0/8\n  - 172.16.0.0/12\n', 2, 'unexpected indentation'),
    ('a: 1\n  b: 2\n', 2, 'unexpected indentation'),
    ('  a: 1\nb: 2\n', 2, 'indented less than the first line'),
    ('a:\n  - 1\n  b: 2\n', 3, 'expected'),
    ('a: 1\n- 2\n', 2, 'a list entry where a "key: value" line was expected'),
    ('a: *alias\n', 1, 'the alias *alias names no anchor defined before it'),
    ('a: [*later]\nb: &later 1\n', 1, 'names no anchor defined before it'),
    ('a: &\n', 1, 'an anchor ("&") without a name'),
    ('base: &b {masqLinkLocal: true}\nc:\n  <<: *b\n', 3, 'merge keys'),
    ('a: &x 1\nb: *x y\n', 2, 'unexpected text after an alias'),
    ('*x: 1\n', 1, 'an alias (*name) as a key is not supported'),
    ('nonMasqueradeCIDRs: [10.0.0.0/8\nmasqLinkLocal: true\n', 2, 'expected "," or "]"'),
    ('nonMasqueradeCIDRs: [10.0.0.0/8,\n', 1, 'never closed'),
    ('nonMasqueradeCIDRs: [10.0.0.0/8] extra\n', 1, 'unexpected text after the closing bracket'),
    ('nonMasqueradeCIDRs: [10.0.0.0/8,, 1]\n', 1, 'an empty entry'),
    ('nonMasqueradeCIDRs: [a: b]\n', 1, 'inside [...] are not supported'),
    ('a: "\\q"\n', 1, 'unknown escape'),
    ('a: "x" y\n', 1, 'unexpected text after a quoted value'),
    ('? a\n: b\n', 1, 'complex keys'),
    ('just a string\n', None, 'must hold a mapping'),
    ('- 10.0.0.0/8\n', None, 'must hold a mapping'),
    ('[10.0.0.0/8]\n', None, 'must hold a mapping'),
    ('a: - b\n', 1, 'a list entry ("- ") is not allowed here'),
    ('a: @b\n', 1, 'cannot start with "@"'),
])
def test_yaml_outside_the_subset_is_refused_with_line_and_text(text, line, fragment):
    e = refused(text, fragment)
    assert e.line == line
    if line:
        assert e.msg.startswith('line %d: ' % line)
        shown = text.split('\n')[line - 1].strip()
        assert shown.replace('\\', '\\\\').replace('"', '\\"') in e.msg


@pytest.mark.parametrize('text,fragment', [
    ('{"nonMasqueradeCIDRs": ["10.0.0.0/8"],}', 'line 1 column 39: invalid JSON'),
    ('{nonMasqueradeCIDRs: [10.0.0.0/8]}', 'a file that starts with "{" is read as JSON'),
    ('{"cidrLimit": NaN}', 'invalid JSON'),
    ('{"cidrLimit": 1} {"cidrLimit": 2}', 'Extra data'),
    ('{\n  "masqLinkLocal": true\n  "cidrLimit": 2\n}', 'line 3 column 3'),
    ('{"a": 1} # comment', 'invalid JSON'),
])
def test_invalid_json_is_refused(text, fragment):
    refused(text, fragment)


# ------------------------------------------------------------ Go durations

# Go's own table (src/time/time_test.go, parseDurationTests).
GO_VALID = [
    ('0', 0), ('5s', 5 * 10**9), ('30s', 30 * 10**9), ('1478s', 1478 * 10**9),
    ('-5s', -5 * 10**9), ('+5s', 5 * 10**9), ('-0', 0), ('+0', 0),
    ('5.0s', 5 * 10**9), ('5.6s', 5600 * 10**6), ('5.s', 5 * 10**9), ('.5s', 500 * 10**6),
    ('1.0s', 10**9), ('1.00s', 10**9), ('1.004s', 1004 * 10**6), ('1.0040s', 1004 * 10**6),
    ('100.00100s', 100001 * 10**6),
    ('10ns', 10), ('11us', 11000), (u'12\u00b5s', 12000), (u'12\u03bcs', 12000), ('13ms', 13 * 10**6),
    ('14s', 14 * 10**9), ('15m', 15 * 60 * 10**9), ('16h', 16 * 3600 * 10**9),
    ('3h30m', (3 * 3600 + 30 * 60) * 10**9), ('10.5s4m', (4 * 60 + 10) * 10**9 + 500 * 10**6),
    ('-2m3.4s', -((2 * 60 + 3) * 10**9 + 400 * 10**6)),
    ('1h2m3s4ms5us6ns', 3723 * 10**9 + 4 * 10**6 + 5000 + 6),
    ('39h9m14.425s', (39 * 3600 + 9 * 60 + 14) * 10**9 + 425 * 10**6),
    ('52763797000ns', 52763797000),
    ('0.3333333333333333333h', 20 * 60 * 10**9),
    ('9007199254740993ns', (1 << 53) + 1),
    ('9223372036854775807ns', (1 << 63) - 1), ('9223372036854775.807us', (1 << 63) - 1),
    ('9223372036s854ms775us807ns', (1 << 63) - 1),
    ('-9223372036854775808ns', -(1 << 63)), ('-9223372036854775.808us', -(1 << 63)),
    ('-9223372036s854ms775us808ns', -(1 << 63)), ('-2562047h47m16.854775808s', -(1 << 63)),
    ('0.100000000000000000000h', 6 * 60 * 10**9),
    ('0.830103483285477580700h', (49 * 60 + 48) * 10**9 + 372539827),
]
GO_INVALID = [
    '', '3', '-', 's', '.', '-.', '.s', '+.s', '1d', u'\x85\x85', u'\xffff', u'hello \xffff world', u'\ufffd',
    u'\ufffd hello \ufffd world', '9223372036854775810ns', '9223372036854775808ns', '-9223372036854775809ns',
    '9223372036854775.808us', '9223372036854ms775us808ns', '1 s', '1e3s', '1h 2m', '00', '1.5',
]


@pytest.mark.parametrize('text,ns', GO_VALID)
def test_go_durations_as_go_parses_them(text, ns):
    assert c.parse_go_duration_ns(text) == ns
    assert c.parse_go_duration(text) == ns / 1e9


@pytest.mark.parametrize('text', GO_INVALID)
def test_go_duration_errors_as_go(text):
    with pytest.raises(MasqError, match='is not a Go duration'):
        c.parse_go_duration_ns(text)


@pytest.mark.parametrize('value', [None, 60, 1.5, ['60s']])
def test_a_duration_must_be_a_string(value):
    with pytest.raises(MasqError, match='must be a string'):
        c.parse_go_duration_ns(value)


# Go's Duration.String() (src/time/time_test.go, durationTests).
@pytest.mark.parametrize('ns,text', [
    (0, '0s'), (1, '1ns'), (1100, u'1.1\u00b5s'), (2200 * 10**3, '2.2ms'), (3300 * 10**6, '3.3s'),
    (4 * 60 * 10**9 + 5 * 10**9, '4m5s'), (4 * 60 * 10**9 + 5001 * 10**6, '4m5.001s'),
    (5 * 3600 * 10**9 + 6 * 60 * 10**9 + 7001 * 10**6, '5h6m7.001s'), (8 * 60 * 10**9 + 1, '8m0.000000001s'),
    ((1 << 63) - 1, '2562047h47m16.854775807s'), (-(1 << 63), '-2562047h47m16.854775808s'),
    (60 * 10**9, '1m0s'), (-1, '-1ns'),
])
def test_go_duration_string(ns, text):
    assert c.format_go_duration(ns) == text


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_go_duration_string_parses_back(ns):
    assert c.parse_go_duration_ns(c.format_go_duration(ns)) == ns


_UNIT_NS = {'ns': 1, 'us': 10**3, 'ms': 10**6, 's': 10**9, 'm': 60 * 10**9, 'h': 3600 * 10**9}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(_UNIT_NS))),
                min_size=1, max_size=6),
       st.sampled_from(['', '+', '-']))
def test_go_duration_whole_numbers_add_up(parts, sign):
    text = sign + ''.join('%d%s' % (number, unit) for number, unit in parts)
    total = sum(number * _UNIT_NS[unit] for number, unit in parts)
    if total > (1 << 63) - (0 if sign == '-' else 1):
        with pytest.raises(MasqError, match='overflows'):
            c.parse_go_duration_ns(text)
    else:
        assert c.parse_go_duration_ns(text) == (-total if sign == '-' else total)


# ------------------------------------------------------------ rendering

def test_render_config_is_upstream_json_that_reads_back():
    settings = expect(nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'], masq_link_local=True, resync_interval='30s')
    text = c.render_config(settings)
    assert text.startswith('{\n  "nonMasqueradeCIDRs": [')
    assert '"resyncInterval": "30s"' in text and '"cidrLimit": 64' in text
    assert c.parse_config(text, ipv6=True) == (settings, [])
    assert c.parse_config(c.render_config(settings, compact=True), ipv6=True) == (settings, [])
    assert c.render_config(DEFAULTS, compact=True) == (
        '{"nonMasqueradeCIDRs":["10.0.0.0/8","172.16.0.0/12","192.168.0.0/16"],"masqLinkLocal":false,'
        '"masqLinkLocalIPv6":false,"resyncInterval":"1m0s","cidrLimit":64}')


# ------------------------------------------------------------ the YAML subset against PyYAML

_CIDR = st.builds(lambda a, b, p: '%d.%d.0.0/%d' % (a, b, p), st.integers(1, 223), st.integers(0, 255),
                  st.just(16))
_WORD = st.from_regex(r'\A[a-z][a-z0-9-]{0,8}\Z', fullmatch=True).filter(
    lambda w: w not in ('y', 'n', 'yes', 'no', 'on', 'off', 'true', 'false', 'null'))
_SCALAR = st.one_of(_CIDR, _WORD, st.integers(0, 10**6), st.booleans())


def _plain(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return str(value)


def _flow(items, draw_quote):
    return '[' + ', '.join(('"%s"' % v) if draw_quote and isinstance(v, str) else _plain(v) for v in items) + ']'


@st.composite
def _documents(draw):
    """A config-like YAML document in a random mix of the styles the subset reads."""
    lines = []
    expected = {}
    keys = draw(st.lists(_WORD, min_size=1, max_size=5, unique=True))
    indent = draw(st.sampled_from([2, 4]))
    for key in keys:
        kind = draw(st.sampled_from(['scalar', 'block', 'compact', 'flow', 'nested']))
        if draw(st.booleans()):
            lines.append('# %s' % draw(_WORD))
        if kind == 'scalar':
            value = draw(_SCALAR)
            quote = isinstance(value, str) and draw(st.booleans())
            lines.append('%s: %s' % (key, ('"%s"' % value) if quote else _plain(value)))
        elif kind in ('block', 'compact'):
            value = draw(st.lists(_SCALAR, min_size=1, max_size=4))
            lines.append('%s:' % key)
            pad = '' if kind == 'compact' else ' ' * indent
            for item in value:
                comment = '  # %s' % draw(_WORD) if draw(st.booleans()) else ''
                lines.append('%s- %s%s' % (pad, _plain(item), comment))
        elif kind == 'flow':
            value = draw(st.lists(_SCALAR, max_size=4))
            lines.append('%s: %s' % (key, _flow(value, draw(st.booleans()))))
        else:
            inner_key = draw(_WORD)
            inner = draw(st.lists(_CIDR, min_size=1, max_size=3))
            value = {inner_key: inner}
            lines.append('%s:' % key)
            lines.append('%s%s:' % (' ' * indent, inner_key))
            lines.extend('%s- %s' % (' ' * (indent * 2), item) for item in inner)
        expected[key] = value
    return '\n'.join(lines) + '\n', expected


def _plain_python(node):
    if isinstance(node, c.Pairs):
        return dict((key, _plain_python(value)) for key, value, _line in node)
    if isinstance(node, list):
        return [_plain_python(item) for item in node]
    return node


@settings(max_examples=300, deadline=None)
@given(_documents())
def test_the_yaml_subset_reads_what_pyyaml_reads(document):
    text, expected = document
    assert yaml.safe_load(text) == expected    # the generator itself is right
    assert _plain_python(c.load_yaml(text)) == expected


# ------------------------------------------------------------ the YAML number forms, written without re

_FLOAT_RE = __import__('re').compile(r'^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$')
_INT_RES = [(__import__('re').compile(p), base) for p, base in (
    (r'^0[xX]([0-9a-fA-F]+)$', 16), (r'^0[oO]([0-7]+)$', 8), (r'^0[bB]([01]+)$', 2), (r'^0([0-7]+)$', 8),
    (r'^([1-9][0-9]*|0)$', 10))]


def _int_by_re(body):
    for pattern, base in _INT_RES:
        match = pattern.match(body)
        if match:
            return match.group(1), base
    return None


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet='0123456789.eE+-xXoObBaAfF_ \u0663', max_size=9))
def test_number_forms_match_go_yamls_patterns(text):
    """yamlsubset reads YAML numbers without re (its import is most of a resync
    cycle's own work): the same strings as go-yaml v2's patterns, exactly."""
    assert yamlsubset.is_yaml_float(text) == bool(_FLOAT_RE.match(text))
    assert yamlsubset.int_digits(text) == _int_by_re(text)


# ------------------------------------------------------------ nesting and aliases (issue 18 items 7 and 8)

def _bomb(width=9, levels=10):
    """A "billion laughs": anchor a0 holds `width` values, each next anchor `width` aliases of the last."""
    lines = ['a0: &a0 [%s]' % ','.join(['lol'] * width)]
    lines += ['a%d: &a%d [%s]' % (n, n, ','.join(['*a%d' % (n - 1)] * width)) for n in range(1, levels)]
    return '\n'.join(lines) + '\n'


BOMB = _bomb()
TOO_DEEP = 'nested more than %d deep' % yamlsubset.MAX_DEPTH
TOO_MANY = 'aliases that expand to more than %d values' % yamlsubset.MAX_ALIAS_NODES
# Files of 15 to 125 KB, as the issue found them, and a few more shapes.
HOSTILE = {
    'yaml flow lists': ('nonMasqueradeCIDRs: ' + '[' * 20000 + ']' * 20000 + '\n', TOO_DEEP),
    'yaml flow mappings': ('a: ' + '{a: ' * 25000 + '1' + '}' * 25000 + '\n', TOO_DEEP),
    'yaml block lists on one line': ('a:\n' + '- ' * 8000 + 'x\n', TOO_DEEP),
    'yaml block lists': ('a:\n' + ''.join(' ' * n + '-\n' for n in range(480)), TOO_DEEP),
    'yaml block mappings': (''.join(' ' * n + 'a:\n' for n in range(480)), TOO_DEEP),
    'yaml anchors on anchors': ('a: ' + '&x ' * 20000 + '1\n', 'a value with two anchors'),
    'yaml flow anchors on anchors': ('a: [' + '&x ' * 20000 + '1]\n', 'a value with two anchors'),
    'yaml aliases nest a list deeper and deeper': (
        'a0: &a0 [x]\n' + ''.join('a%d: &a%d [*a%d]\n' % (n, n, n - 1) for n in range(1, 3000)), TOO_DEEP),
    'json arrays': ('{"nonMasqueradeCIDRs": ' + '[' * 30000 + ']' * 30000 + '}', TOO_DEEP),
    'json objects': ('{"a": ' + '{"a": ' * 15000 + '1' + '}' * 15000 + '}', TOO_DEEP),
    'json just over the limit': ('{"a": ' + '[' * 32 + ']' * 32 + '}', TOO_DEEP),
    'alias bomb as a flow key': (BOMB + 'b: {*a9: 1}\n', TOO_MANY),
    'alias bomb as a value': (BOMB + 'nonMasqueradeCIDRs: *a9\n', TOO_MANY),
    'alias bomb in a list': (BOMB + 'snatTo: [*a9]\n', TOO_MANY),
    'alias bomb in a block list': (BOMB + 'sourceCIDRs:\n  - *a9\n', TOO_MANY),
    'an alias of a list as a key': ('a: &x [1]\nb: {*x: 1}\n', 'a list or mapping as a key is not supported'),
    'an anchored list as a key': ('a: {&x [1]: 1}\n', 'a list or mapping as a key is not supported'),
}

_CHILD = r'''
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config import config
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import errors
try:
    config.parse_config(sys.stdin.read())
    out = ('accepted', '')
except errors.ConfigError as e:
    out = ('refused', e.msg)
except BaseException as e:
    out = (type(e).__name__, str(e))
print(json.dumps(out))
'''


def _parse_bounded(text):
    """parse_config in a child process, bounded in time (30 s) and memory (1 GiB): a reader that
    recurses or expands without bound fails the test instead of taking the machine with it."""
    import json
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, '-c', _CHILD], input=text, capture_output=True, text=True,
                          timeout=30, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize('case', sorted(HOSTILE))
def test_deep_nesting_and_alias_bombs_are_refused_like_any_bad_file(case):
    text, fragment = HOSTILE[case]
    assert len(text) <= config.MAX_CONFIG_BYTES
    outcome, msg = _parse_bounded(text)
    assert outcome == 'refused', (outcome, msg[:300])
    assert fragment in msg, msg[:300]


def test_depth_and_aliases_within_the_bounds_are_read():
    limit = yamlsubset.MAX_DEPTH
    # Exactly MAX_DEPTH deep (the mapping and limit - 1 lists), in each form: read.
    nested = c.load_yaml('a: ' + '[' * (limit - 1) + 'x' + ']' * (limit - 1) + '\n')[0][1]
    for _n in range(limit - 2):
        nested = nested[0]
    assert nested == ['x']
    refused('a: ' + '[' * limit + 'x' + ']' * limit + '\n', TOO_DEEP, 'line 1: ')
    c.load_yaml(''.join(' ' * n + 'a:\n' for n in range(limit)))
    refused(''.join(' ' * n + 'a:\n' for n in range(limit + 1)), TOO_DEEP, 'line %d: ' % (limit + 1))
    config.load_json('{"a": ' + '[' * (limit - 1) + ']' * (limit - 1) + '}')
    # An alias of a deep list counts at the depth it is used.
    deep = 'a: &x ' + '[' * (limit - 1) + ']' * (limit - 1) + '\n'
    c.load_yaml(deep + 'b: *x\n')
    refused(deep + 'b: [*x]\n', TOO_DEEP, 'counting what the alias *x brings in')
    # Aliases a real file uses: a list repeated, a scalar as a key.
    settings, _warnings = parse('pods: &pods\n  - 10.244.0.0/16\nsourceCIDRs: *pods\nexceptionCIDRs: []\n'
                                'nonMasqueradeCIDRs: [10.0.0.0/8, *cidr]\n'.replace('*cidr', '10.96.0.0/12'))
    assert settings['source_cidrs'] == ['10.244.0.0/16']
    assert c.load_yaml('a: &k masqLinkLocal\nb: {*k: true}\n')[1][1] == c.Pairs([('masqLinkLocal', True, 2)])
    # Just under the alias budget: read (the values are shared, not copied).
    width = 100
    text = 'a0: &a0 [%s]\n' % ','.join(['x'] * width)
    text += 'a1: &a1 [%s]\n' % ','.join(['*a0'] * (yamlsubset.MAX_ALIAS_NODES // (width + 1)))
    c.load_yaml(text)
    refused(text + 'a2: *a0\n', TOO_MANY)


def test_a_recursion_error_is_a_refusal_as_a_last_resort(monkeypatch):
    def recurse(_text):
        raise RecursionError('maximum recursion depth exceeded')
    monkeypatch.setattr(config, 'load_yaml', recurse)
    refused('a: 1\n', TOO_DEEP)


# ------------------------------------------------------------ the "- value" fast path

_ITEM = st.text(alphabet='0123456789abcdefxyzABXY./:_-+#&*[]{}"\' \t!|>%@`,?~', min_size=0, max_size=12)


def _outcome(text):
    try:
        return 'read', _plain_python(c.load_yaml(text))
    except c.ConfigError as e:
        return 'refused', e.msg


@settings(max_examples=1500, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=4), st.sampled_from(['', '  ']),
       st.sampled_from(['', '  x: 1\n', '   - 1\n', '\t- 1\n']))
def test_the_fast_path_for_list_lines_reads_and_refuses_as_the_general_path(items, indent, after):
    """Plain "- 10.0.0.0/8" lines take a fast path; with it off (no character qualifies), every
    document reads to the same value or is refused with the same message."""
    text = 'k:\n' + ''.join('%s- %s\n' % (indent, item) for item in items) + after
    fast = _outcome(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(yamlsubset, '_FAST_PLAIN', frozenset())
        slow = _outcome(text)
    assert fast == slow, text


def test_the_fast_path_reads_cidrs_numbers_and_words_as_go_yaml():
    text = 'k:\n  - 10.0.0.0/8\n  - fd00::/8\n  - ::/0\n  - 1024\n  - 0x10\n  - 1.5\n  - yes\n  - null\n  - eth0\n'
    assert _plain_python(c.load_yaml(text)) == {
        'k': ['10.0.0.0/8', 'fd00::/8', '::/0', 1024, 16, 1.5, True, None, 'eth0']}


def test_a_plain_config_is_read_without_the_heavy_standard_modules():
    """What keeps a no-drift resync cycle near its floor: importing the resync entry point, reading
    a config file as the role writes it and building its policy load none of re, subprocess,
    ipaddress, json or collections (each costs a fresh interpreter 1 to 5 ms of CPU)."""
    import subprocess
    import sys
    child = (
        'import sys\n'
        'from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync\n'
        'from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config import config\n'
        'text = "# Ansible managed\\nnonMasqueradeCIDRs:\\n" + "".join("  - 10.%d.0.0/16\\n" % n for n in range(200))\n'
        'text += "masqLinkLocal: false\\nresyncInterval: 60s\\ncidrLimit: 300\\n"\n'
        'settings, warnings = config.parse_config(text)\n'
        'resync.build_policy(settings, resync.Options())\n'
        'print(" ".join(sorted(set(sys.modules) & {"re", "subprocess", "ipaddress", "json", "collections"})))\n'
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, '-S', '-B', '-c', child], capture_output=True, text=True, timeout=60,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [], proc.stdout


# ------------------------------------------------------------ the canonical IPv4 list, checked once

_ENTRIES = st.sampled_from(['10.0.0.0/8', '10.0.0.0/8', '192.168.0.0/16', '100.64.0.0/10', '0.0.0.0/0', '1.2.3.4/32',
                            '010.0.0.0/8', '10.0.0.1/8', '10.0.0.0', 'fd00::/8', '2001:DB8::/32', '"10.1.0.0/16"',
                            '" 10.2.0.0/16"', '1', 'true', '[10.3.0.0/16]', '10.0.0.0/33', '::ffff:0:0/96'])


def _cycle_outcome(text, ipv6, rule_format, reserved):
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync
    try:
        settings, warnings = c.parse_config(text, ipv6=ipv6, rule_format=rule_format)
    except c.ConfigError as e:
        return 'refused', e.msg
    opts = resync.Options()
    opts.enable_ipv6, opts.rule_format, opts.nomasq_all_reserved_ranges = ipv6, rule_format, reserved
    try:
        policy = resync.build_policy(settings, opts)
    except MasqError as e:
        return 'policy refused', list(settings['nonmasquerade_cidrs']), warnings, e.msg
    return list(settings['nonmasquerade_cidrs']), warnings, policy.cidrs, policy.warnings


@settings(max_examples=400, deadline=None)
@given(st.lists(_ENTRIES, max_size=8), st.booleans(), st.sampled_from(['docs', 'upstream']), st.booleans(),
       st.integers(min_value=0, max_value=9))
def test_a_canonical_list_is_checked_once_with_the_same_outcome(entries, ipv6, rule_format, reserved, limit):
    """A list of canonical IPv4 CIDRs is checked once, by the config reader (the policy takes it as
    checked); every list gives the settings, warnings, policy and errors of the full check."""
    text = 'nonMasqueradeCIDRs:\n' + ''.join('  - %s\n' % entry for entry in entries) + 'cidrLimit: %d\n' % limit
    fast = _cycle_outcome(text, ipv6, rule_format, reserved)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, 'canonical_ipv4_cidr', lambda text: None)   # no list is taken as checked
        full = _cycle_outcome(text, ipv6, rule_format, reserved)
    assert fast == full, text


def test_the_policy_takes_a_canonical_list_as_checked_but_still_counts_it():
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import cidrs, policy
    settings = settings_of('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 192.168.0.0/16\n')
    assert isinstance(settings['nonmasquerade_cidrs'], cidrs.CanonicalCidrs)
    assert policy.Policy(nonmasquerade_cidrs=settings['nonmasquerade_cidrs']).cidrs == {
        4: ['10.0.0.0/8', '192.168.0.0/16'], 6: []}
    with pytest.raises(MasqError) as e:
        policy.Policy(nonmasquerade_cidrs=settings['nonmasquerade_cidrs'], cidr_limit=1)
    assert 'is over cidr_limit 1' in e.value.msg
    # A list with a duplicate, or in another form, is not marked: the policy checks it in full.
    assert not isinstance(settings_of('nonMasqueradeCIDRs: [10.0.0.0/8, 10.0.0.0/8]\n')['nonmasquerade_cidrs'],
                          cidrs.CanonicalCidrs)
    assert not isinstance(settings_of('nonMasqueradeCIDRs: [fd00::/8]\n', ipv6=True)['nonmasquerade_cidrs'],
                          cidrs.CanonicalCidrs)
