"""The ipmasq.agent.go_duration filter: Go durations in seconds, bad values refused."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.filter.go_duration import FilterModule, go_duration


@pytest.mark.parametrize('text,seconds', [
    ('60s', 60), ('1m0s', 60), ('1m30s', 90), ('1h', 3600), ('1.5h', 5400), ('0', 0), ('-5s', -5),
    ('500ms', 0.5), ('1.5s', 1.5), ('.25s', 0.25), ('1h0m0.001s', 3600.001), (u'1500\u00b5s', 0.0015),
])
def test_seconds(text, seconds):
    value = go_duration(text)
    assert value == seconds
    assert isinstance(value, int) is (seconds == int(seconds))


@pytest.mark.parametrize('value,fragment', [
    ('1d', 'unknown unit "d"'), ('', 'is not a Go duration'), ('60', 'missing unit'),
    ('9999999999h', 'overflows'), (60, 'must be a string'), (None, 'must be a string'),
])
def test_bad_values_name_the_filter_and_the_value(value, fragment):
    with pytest.raises(AnsibleFilterError) as e:
        go_duration(value)
    assert str(e.value).startswith('ipmasq.agent.go_duration: ') and fragment in str(e.value)


def test_registered_under_its_name():
    assert FilterModule().filters() == {'go_duration': go_duration}
