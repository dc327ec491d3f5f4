"""A listing in the docs printed with ``-n`` shows what ``iptables -L -n``
really prints: since iptables 1.8.9 the protocol column says ``0`` where
``-L`` without ``-n`` says ``all``, and no name stands for an address.
The iptables in a namespace of the test's own says which word goes with
which form, so the check follows the installed iptables."""
import glob
import os
import re
import subprocess
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = sorted(glob.glob(os.path.join(ROOT, 'docs', 'docsite', 'rst', '*.rst')) + [os.path.join(ROOT, 'README.md')]
              + glob.glob(os.path.join(ROOT, 'roles', '*', 'README.md')))
COMMAND = re.compile(r'^\s*#\s+(ip6?tables(?:-legacy|-nft)?\s.*\s-L\b.*)$')


def _listings():
    """(file, line, command, [rule lines]) of each `# iptables ... -L ...` in the docs."""
    found = []
    for path in DOCS:
        lines = open(path, encoding='utf-8').read().splitlines()
        for i, line in enumerate(lines):
            m = COMMAND.match(line)
            if not m:
                continue
            rules = []
            for nxt in lines[i + 1:]:
                if re.match(r'^\s*#', nxt) or not nxt.strip() or nxt.strip().startswith('```'):
                    break
                if nxt.split() and nxt.split()[0] in ('RETURN', 'MASQUERADE', 'SNAT', 'IP-MASQ-AGENT'):
                    rules.append(nxt)
            found.append((os.path.relpath(path, ROOT), i + 1, m.group(1), rules))
    return found


@pytest.fixture(scope='module')
def prot_words():
    """What this iptables prints in the prot column for any protocol: with -n, without."""
    ns = 'docprot-%s' % uuid.uuid4().hex[:8]
    subprocess.run(['ip', 'netns', 'add', ns], check=True)
    try:
        run = ['ip', 'netns', 'exec', ns, 'iptables', '-t', 'nat']
        subprocess.run(run + ['-N', 'PROBE'], check=True)
        subprocess.run(run + ['-A', 'PROBE', '-j', 'RETURN'], check=True)
        words = {}
        for numeric in (True, False):
            out = subprocess.run(run + ['-L', 'PROBE'] + (['-n'] if numeric else []), check=True,
                                 capture_output=True, text=True).stdout.splitlines()
            words[numeric] = out[2].split()[1]
        return words
    finally:
        subprocess.run(['ip', 'netns', 'del', ns], check=False)


def test_the_docs_have_listings():
    assert any(rules for _f, _l, _c, rules in _listings())


def test_each_listing_shows_what_its_command_prints(prot_words):
    wrong = []
    for path, line, command, rules in _listings():
        numeric = re.search(r'(^|\s)-(n|[A-Za-z]*n[A-Za-z]*)(\s|$)', command.replace('-t nat', '')) is not None
        want = prot_words[numeric]
        for rule in rules:
            if rule.split()[1] != want:
                wrong.append('%s:%d (%s): prot %r, iptables prints %r: %s'
                             % (path, line, command, rule.split()[1], want, rule.strip()[:60]))
            if numeric and 'anywhere' in rule:
                wrong.append('%s:%d (%s): "anywhere" under -n: %s' % (path, line, command, rule.strip()[:60]))
    assert not wrong, '\n'.join(wrong)
