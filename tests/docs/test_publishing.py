"""What Galaxy and Automation Hub need of galaxy.yml besides the importer's own
run (tests/install/test_galaxy_importer.py): the collection's addresses, and a
security policy whose reporting channel is one of them.

The addresses are placeholders until the collection has a public address
(``https://placeholder.invalid/set-KEY-in-galaxy.yml``): each names the key to
set, and SECURITY.md names the same ``issues`` address, so setting the real one
is one change in galaxy.yml and one in SECURITY.md that this test holds equal.
"""
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


def galaxy():
    return yaml.safe_load(read('galaxy.yml'))


def test_galaxy_yml_names_the_repository_the_issues_and_the_documentation():
    """Galaxy's importer refuses a collection without ``repository``."""
    meta = galaxy()
    for key in ('repository', 'issues', 'documentation'):
        assert re.match(r'^https://[^\s/]+/\S+$', str(meta.get(key) or '')), (key, meta.get(key))
        if 'placeholder' in meta[key]:
            assert meta[key] == 'https://placeholder.invalid/set-%s-in-galaxy.yml' % key, (key, meta[key])


def test_ansible_lint_no_longer_skips_the_repository_rule():
    config = yaml.safe_load(read('.ansible-lint'))
    skipped = (config.get('skip_list') or []) + (config.get('warn_list') or [])
    assert not [rule for rule in skipped if rule.startswith('galaxy')], skipped


def reporting_section():
    text = read('SECURITY.md')
    return text.split('## Reporting a vulnerability', 1)[1].split('\n## ', 1)[0]


def test_security_policy_names_the_reporting_channel_of_galaxy_yml():
    """SECURITY.md (in the tarball) names a channel, the private reporting of
    galaxy.yml's ``issues``, not "the maintainers" without an address."""
    section = reporting_section()
    issues = galaxy()['issues']
    assert '<%s>' % issues in section, 'SECURITY.md does not name galaxy.yml\'s issues (%s)' % issues
    assert 'by mail to its maintainers' not in section
    urls = set(re.findall(r'https?://[^\s>)]+', section))
    assert urls == {issues}, 'SECURITY.md names another reporting address than galaxy.yml\'s issues: %s' % urls
    if 'placeholder' in issues:
        assert 'PLACEHOLDER' in section


def test_the_docs_point_at_the_security_policy_and_the_issues():
    readme = read('README.md')
    assert '[SECURITY.md](SECURITY.md)' in readme
    assert galaxy()['issues'] in readme
    assert 'see [SECURITY.md](SECURITY.md)' in read('CONTRIBUTING.md')
