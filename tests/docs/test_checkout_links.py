"""Every link and path that README.md and the guides (docs/docsite/rst/*.rst)
point to in this repository ships in the release tarball, or is labelled as
a checkout link: a user of the installed collection has no tests/, bench/,
scripts/ or extensions/ (build_ignore in galaxy.yml).

The label (README.md, the guides, CONTRIBUTING.md say so): the words "in a
git checkout" in the paragraph, list item or code block that holds the
reference, in the paragraph just before a code block (one that ends with a
colon), or in the first paragraph of its section below the page's title,
which then labels the whole section (down to the next heading of the same
or a higher level).

The tarball's file list is computed the way ansible-galaxy's build walks the
tree (its fixed ignore patterns and galaxy.yml's build_ignore, matched with
fnmatch against each directory's and file's path), over the tracked files:
no build, a fraction of a second. tests/install/test_build_install.py builds
the real tarball and checks what it holds.
"""
import fnmatch
import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = 'in a git checkout'
DOCS = ['README.md'] + sorted(os.path.join('docs', 'docsite', 'rst', n)
                              for n in os.listdir(os.path.join(ROOT, 'docs', 'docsite', 'rst')) if n.endswith('.rst'))
# ansible-galaxy's own, before build_ignore (ansible/galaxy/collection/__init__.py).
GALAXY_IGNORE = ['MANIFEST.json', 'FILES.json', 'galaxy.yml', 'galaxy.yaml', '.git', '*.pyc', '*.retry',
                 'tests/output', 'ipmasq-agent-*.tar.gz']
GALAXY_IGNORE_DIRS = {'CVS', '.bzr', '.hg', '.git', '.svn', '__pycache__', '.tox'}


def tracked():
    out = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    return [p for p in out.split('\0') if p and os.path.exists(os.path.join(ROOT, p))]


def shipped_files(files, build_ignore):
    """The files of ``files`` that `ansible-galaxy collection build` puts in the tarball."""
    patterns = GALAXY_IGNORE + list(build_ignore)
    out = set()
    for rel in files:
        parts = rel.split('/')
        dirs = ['/'.join(parts[:i]) for i in range(1, len(parts))]
        if any(d.split('/')[-1] in GALAXY_IGNORE_DIRS or any(fnmatch.fnmatch(d, p) for p in patterns) for d in dirs):
            continue
        if not any(fnmatch.fnmatch(rel, p) for p in patterns):
            out.add(rel)
    return out


@pytest.fixture(scope='module')
def repo():
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        ignore = yaml.safe_load(handle).get('build_ignore') or []
    files = tracked()
    return set(files), shipped_files(files, ignore)


def ships(path, files, shipped):
    """None when ``path`` is not a file or folder of the repository, else whether it ships."""
    path = path.rstrip('/')
    if path in files:
        return path in shipped
    below = [f for f in files if f.startswith(path + '/')]
    if not below:
        return None
    return any(f in shipped for f in below)


# Units of text: a paragraph, a list item, a code block (fenced, or an rst literal block).
def units(lines, rst):
    """(kind, first line number, text, heading level or None) for each unit, in order."""
    out, cur, start, kind = [], [], 0, 'para'
    styles = []

    def flush():
        if cur:
            out.append((kind, start, '\n'.join(cur), None))
        del cur[:]

    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ''
        if not rst and line.startswith('```'):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].startswith('```'):
                j += 1
            out.append(('code', i + 1, '\n'.join(lines[i + 1:j]), None))
            i = j + 1
            continue
        heading = None
        if not rst and re.match(r'#{1,6} ', line):
            heading = len(line.split()[0])
            step = 1
        elif rst and line.strip() and nxt and re.match(r'^([=\-~^"*+#])\1+\s*$', nxt) and len(nxt.strip()) >= len(line.strip()):
            if nxt[0] not in styles:
                styles.append(nxt[0])
            heading = styles.index(nxt[0]) + 1
            step = 2
        if heading:
            flush()
            out.append(('heading', i + 1, line, heading))
            i += step
            continue
        if rst and (line.rstrip().endswith('::')) and not line.startswith(' '):
            cur.append(line)
            flush()
            j = i + 1
            body = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith((' ', '\t'))):
                body.append(lines[j])
                j += 1
            out.append(('code', i + 2, '\n'.join(body), None))
            i = j
            continue
        if not line.strip():
            flush()
        else:
            if re.match(r'\s*([-*+]|\d+\.|#\.) ', line):
                flush()
            if not cur:
                start, kind = i + 1, 'para'
            cur.append(line)
        i += 1
    flush()
    return out


def labelled(text):
    return MARK in ' '.join(text.lower().split())


def references(text, files, markdown):
    """Repository paths that ``text`` points to: link targets, and paths (a top-level
    folder of the repository, then more) or top-level file names in literals and code."""
    tops = {f.split('/')[0] for f in files if '/' in f}
    found = []
    if markdown:
        found += [t.split('#')[0] for t in re.findall(r'\]\(([^)\s]+)\)', text)]
    else:
        found += [t.split('#')[0] for t in re.findall(r'`[^`<]*<([^>\s]+)>`_', text)]
    for token in re.findall(r'[A-Za-z0-9_./*~-]+', text):
        token = token.rstrip('.,:;').lstrip('./') if not token.startswith('../') else token
        if '/' in token and token.split('/')[0] in tops or token in files and '/' not in token:
            found.append(token)
    out = []
    for f in found:
        if f and '://' not in f and not f.startswith(('/', '~', 'mailto:')) and f not in out:
            out.append(f)
    return out


def problems(rel, files, shipped, text=None):
    """The unlabelled references of ``rel`` (or of ``text``, as if it were ``rel``)
    to files that do not ship, as 'rel:line: path'."""
    if text is None:
        with open(os.path.join(ROOT, rel), encoding='utf-8') as handle:
            text = handle.read()
    lines = text.split('\n')
    rst = rel.endswith('.rst')
    found = []
    section = []      # [(level, labelled)] of the open headings
    first_para = False
    previous = None
    for kind, lineno, text, level in units(lines, rst):
        if kind == 'heading':
            section = [s for s in section if s[0] < level] + [(level, False)]
            first_para = True
            previous = None
            continue
        if rst and kind == 'para' and text.startswith('.. ') and '::' not in text.split('\n')[0]:
            continue  # an rst comment or link target: not shown
        if kind == 'para' and first_para:
            first_para = False
            if labelled(text) and section and section[-1][0] > 1:
                section[-1] = (section[-1][0], True)
        ok = labelled(text) or any(s[1] for s in section)
        if kind == 'code' and previous is not None and previous.rstrip().endswith(':') and labelled(previous):
            ok = True
        if not ok:
            base = os.path.dirname(rel)
            for ref in references(text, files, markdown=not rst):
                target = os.path.normpath(os.path.join(base, ref)) if kind == 'para' and '](' + ref in text else ref
                if ships(target, files, shipped) is False:
                    found.append('%s:%d: %s' % (rel, lineno, ref))
        if kind != 'code':
            previous = text
    return found


def test_shipped_list_follows_build_ignore(repo):
    files, shipped = repo
    assert 'plugins/modules/masq_chain.py' in shipped and 'README.md' in shipped
    assert not [f for f in shipped if f.split('/')[0] in ('tests', 'bench', 'scripts', 'extensions')]
    assert 'galaxy.yml' not in shipped and 'changelogs/changelog.yaml' in shipped


@pytest.mark.parametrize('rel', DOCS)
def test_every_reference_ships_or_is_a_checkout_link(repo, rel):
    files, shipped = repo
    found = problems(rel, files, shipped)
    assert not found, ('these point to files the release tarball does not hold; label them as checkout links '
                       '("%s", see this test\'s docstring) or point elsewhere:\n%s' % (MARK, '\n'.join(found)))


def test_the_label_is_recognised():
    """The rules themselves, on a small text: unlabelled, labelled in place, in the
    introducing paragraph, and by the section's first paragraph."""
    files = {'tests/run-all.sh', 'bench/README.md', 'README.md', 'plugins/x.py'}
    shipped = {'README.md', 'plugins/x.py'}

    def bad(text, name='X.md'):
        return problems(name, files, shipped, text)
    assert bad('See [bench](bench/README.md) and `plugins/x.py`.\n') == ['X.md:1: bench/README.md']
    assert bad('See [bench](bench/README.md) (in a git checkout).\n') == []
    assert bad('In a git checkout:\n\n```\nbash tests/run-all.sh\n```\n') == []
    assert bad('Run:\n\n```\nbash tests/run-all.sh\n```\n') != []
    assert bad('## Tests\n\nIn a git checkout only.\n\n- `tests/run-all.sh`\n\n## Next\n\n- `tests/run-all.sh`\n') == [
        'X.md:9: tests/run-all.sh']
    assert bad('Title\n=====\n\nRun ``bash tests/run-all.sh``.\n', 'X.rst') != []
    assert bad('Title\n=====\n\nSub\n---\n\nIn a git checkout.\n\nSubsub\n~~~~~~\n\nRun ``bash tests/run-all.sh``.\n',
               'X.rst') == []
    # The page's title is no section label: a README that opens in a git checkout
    # labels only what that paragraph introduces.
    assert bad('# T\n\nIn a git checkout:\n\n```\nbash tests/run-all.sh\n```\n\nSee `tests/run-all.sh`.\n') == [
        'X.md:9: tests/run-all.sh']
