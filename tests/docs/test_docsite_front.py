"""The docsite's front page, footer and links are the collection's own, not
antsibull-docs' stock ones, and the role page has examples.  Reads the site
that tests/run-all.sh's docsite step built (build/docsite), or builds one."""
import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope='module')
def html(tmp_path_factory):
    site = os.path.join(ROOT, 'build', 'docsite', 'build', 'html')
    if not os.path.exists(os.path.join(site, 'index.html')):
        out = tmp_path_factory.mktemp('docsite')
        subprocess.run(['bash', os.path.join(ROOT, 'tests', 'docs', 'build-docsite.sh'), str(out)], check=True,
                       capture_output=True, timeout=900)
        site = os.path.join(str(out), 'build', 'html')

    def read(*parts):
        with open(os.path.join(site, *parts), encoding='utf-8') as handle:
            return handle.read()
    return read


def test_front_page_is_ours(html):
    page = html('index.html')
    assert 'Welcome to my Ansible collection' not in page
    assert 'Ansible contributors' not in page
    assert re.search(r'<h1>ipmasq\.agent', page)
    assert 'ipmasq.agent contributors, GPL-3.0-or-later' in page
    assert 'quickstart' in page


def test_collection_page_has_the_links(html):
    links = yaml.safe_load(open(os.path.join(ROOT, 'docs', 'docsite', 'links.yml')))
    page = html('collections', 'ipmasq', 'agent', 'index.html')
    for link in links['extra_links'] + links['communication']['forums']:
        assert link['url'] in page


def test_role_page_has_examples(html):
    page = html('collections', 'ipmasq', 'agent', 'ip_masq_role.html')
    assert 'Examples' in page and 'ipmasq.agent.site' in page


def test_readme_has_the_sections_users_look_for():
    heads = re.findall(r'^## (.+)$', open(os.path.join(ROOT, 'README.md')).read(), re.MULTILINE)
    for head in ('Release notes', 'Support', 'Contributing', 'License'):
        assert head in heads
