# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Semantic versioning of the next release, from the changelog fragments that
wait for it (one home for the rule: scripts/release.sh and
tests/docs/test_changelog.py both ask this file).

    python3 scripts/release_version.py check VERSION   # may VERSION be released now?

The rule (README: semantic versioning for the module, the role, the filters and
the role's variables):
- a waiting ``breaking_changes`` or ``removed_features`` fragment makes the next
  release a major one (X+1.0.0);
- ``major_changes``, ``minor_changes`` or ``deprecated_features`` a minor one;
- fixes only, a patch release;
- every deprecation names the version it goes in (``removed in X.0.0``), a major
  release after the next one.

``main``'s galaxy.yml names the next release as a pre-release (``2.0.0-dev0``):
its base version (``2.0.0``) is what the rule checks.
"""
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAJOR = ('breaking_changes', 'removed_features')
MINOR = ('major_changes', 'minor_changes', 'deprecated_features')
VERSION = re.compile(r'^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$')
REMOVED_IN = re.compile(r'removed in (\d+\.\d+\.\d+)')


def parse(version):
    """(major, minor, patch, pre-release or None); ValueError for anything else."""
    found = VERSION.match(str(version))
    if not found:
        raise ValueError('%r is not a semantic version X.Y.Z (or X.Y.Z-pre)' % (version,))
    return int(found.group(1)), int(found.group(2)), int(found.group(3)), found.group(4)


def base(version):
    """The release a version names: 2.0.0 for 2.0.0-dev0."""
    return '%d.%d.%d' % parse(version)[:3]


def key(version):
    return parse(version)[:3]


def load(*parts):
    with open(os.path.join(*parts)) as handle:
        return yaml.safe_load(handle)


def releases(root=ROOT):
    return sorted((load(root, 'changelogs', 'changelog.yaml') or {}).get('releases') or {}, key=key)


def fragments(root=ROOT):
    """{file name: its sections}, for every fragment waiting in changelogs/fragments/."""
    folder = os.path.join(root, 'changelogs', 'fragments')
    return dict((name, load(folder, name) or {}) for name in sorted(os.listdir(folder))
                if name.endswith(('.yml', '.yaml')))


def required(last, waiting):
    """The lowest version the waiting fragments allow after the release ``last``."""
    major, minor, patch = key(last)
    sections = set()
    for content in waiting.values():
        sections |= set(content)
    if sections & set(MAJOR):
        return '%d.0.0' % (major + 1)
    if sections & set(MINOR):
        return '%d.%d.0' % (major, minor + 1)
    return '%d.%d.%d' % (major, minor, patch + 1)


def entries(content, section):
    found = content.get(section) or []
    return found if isinstance(found, list) else [found]


def problems(version, last, waiting):
    """What is wrong with releasing ``version`` (its base) next, after ``last``
    (None before the first release), with these fragments waiting."""
    out = []
    try:
        next_release = base(version)
    except ValueError as exc:
        return [str(exc)]
    if last is not None:
        need = required(last, waiting)
        if key(next_release) <= key(last):
            out.append('%s is not above the last release %s' % (next_release, last))
        elif key(next_release) < key(need):
            why = [name for name, content in waiting.items() if set(content) & set(MAJOR)] if key(need)[1:] == (0, 0) \
                else [name for name, content in waiting.items() if set(content) & set(MINOR)]
            out.append('%s is too low for the waiting fragments: they make the next release at least %s '
                       '(semantic versioning; %s)' % (next_release, need, ', '.join(why)))
    for name, content in waiting.items():
        for entry in entries(content, 'deprecated_features'):
            named = REMOVED_IN.findall(entry)
            if not named:
                out.append('%s: a deprecation that does not say when it goes ("removed in X.0.0"): %s'
                           % (name, ' '.join(entry.split()[:12])))
            for gone in named:
                if key(gone)[1:] != (0, 0) or key(gone)[0] <= key(next_release)[0]:
                    out.append('%s: removed in %s, which is not a major release after %s'
                               % (name, gone, next_release))
    return out


def summary_problems(version, waiting):
    """A release carries a release_summary (antsibull-changelog warns without one)."""
    if waiting and not [name for name, content in waiting.items() if 'release_summary' in content]:
        return ['no fragment holds the release_summary of %s' % base(version)]
    return []


def main(argv):
    if len(argv) != 3 or argv[1] != 'check':
        sys.stderr.write('usage: release_version.py check VERSION\n')
        return 2
    known = releases()
    waiting = fragments()
    found = problems(argv[2], known[-1] if known else None, waiting)
    if not found:
        found = summary_problems(argv[2], waiting)
    for line in found:
        sys.stderr.write('release_version.py: %s\n' % line)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
