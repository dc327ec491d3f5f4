"""Role variables in every form users give them, for property tests
(hypothesis): typed YAML, an ``-e name=value`` string, a JSON value, a Jinja
expression. ``given_forms()`` draws ``(typed, given, forms)``: the typed
values of a valid policy, the same values as given in a form drawn for each
variable, and that form's name."""
import json

from hypothesis import strategies as st

from ansible.template import trust_as_template

_V4 = ['10.244.0.0/16', '10.30.0.0/16', '192.168.0.0/16', '172.16.0.0/12']
_V6 = ['fd00:10::/48', 'fd00:20::/56']


@st.composite
def role_variables(draw):
    """Typed role variables (a valid policy: the forms are what varies)."""
    ipv6 = draw(st.booleans())
    cidrs = draw(st.lists(st.sampled_from(_V4), min_size=1, max_size=4, unique=True))
    if ipv6:
        cidrs += draw(st.lists(st.sampled_from(_V6), max_size=2, unique=True))
    values = {
        'ip_masq_nonmasquerade_cidrs': cidrs,
        'ip_masq_masq_link_local': draw(st.booleans()),
        'ip_masq_masq_link_local_ipv6': draw(st.booleans()),
        'ip_masq_enable_ipv6': ipv6,
        'ip_masq_nomasq_all_reserved_ranges': draw(st.booleans()),
        'ip_masq_random_fully': draw(st.sampled_from([None, True, False])),
        'ip_masq_cidr_limit': draw(st.integers(len(cidrs) + 9, 200)),
        'ip_masq_to_ports': draw(st.sampled_from([[], ['1024-29999'], ['1024', '2000-3000']])),
        'ip_masq_jump_position': draw(st.sampled_from(['append', 'first'])),
        'ip_masq_chain': draw(st.sampled_from(['IP-MASQ-AGENT', 'MY-MASQ'])),
        'ip_masq_resync_interval': draw(st.sampled_from(['60s', '1m0s', '500ms', '1h'])),
        'ip_masq_out_interfaces': draw(st.sampled_from([[], ['eth0'], ['eth0', 'bond0.100']])),
        'ip_masq_snat_to_require_local': draw(st.booleans()),
    }
    if draw(st.booleans()):
        values['ip_masq_source_cidrs'] = ['10.244.0.0/16'] + (['fd00:10::/48'] if ipv6 else [])
    return values


def _kv(value, draw):
    """What ``-e name=value`` gives the play: a string (None and [] cannot be typed that way)."""
    if isinstance(value, bool):
        return draw(st.sampled_from(['true', 'True', 'yes', '1'] if value else ['false', 'False', 'no', '0']))
    if isinstance(value, list):
        return ','.join(value) if value else None
    return None if value is None else str(value)


def _jinja(value):
    """A Jinja expression that yields ``value`` (as a string in group_vars: "{{ ... }}")."""
    literal = 'none' if value is None else ('true' if value is True else 'false' if value is False
                                            else json.dumps(value))
    return trust_as_template('{{ %s }}' % literal)


@st.composite
def given_forms(draw):
    typed = draw(role_variables())
    given, forms = {}, {}
    for name, value in typed.items():
        form = draw(st.sampled_from(['typed', 'kv', 'json', 'jinja']))
        if form == 'kv':
            text = _kv(value, draw)
            if text is None:
                form = 'typed'
            else:
                given[name] = text
        if form == 'json':
            given[name] = json.loads(json.dumps(value))
        elif form == 'jinja':
            given[name] = _jinja(value)
        elif form == 'typed':
            given[name] = value
        forms[name] = form
    return typed, given, forms
