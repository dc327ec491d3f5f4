#!/usr/bin/env bash
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Cut release VERSION of ipmasq.agent: scripts/release.sh X.Y.Z
# On a clean checkout of main, with .venv and .venv-importer (scripts/bootstrap.sh):
#   1. checks VERSION against the waiting changelog fragments
#      (scripts/release_version.py: semantic versioning, deprecations, a
#      release_summary),
#   2. sets galaxy.yml's version to VERSION (main carries X.Y.Z-dev0),
#   3. cuts the notes: antsibull-changelog release (changelogs/changelog.yaml,
#      CHANGELOG.rst; the fragments are removed),
#   4. the docs that name the version: the tarball and image names in the README
#      and the guides, upgrading.rst's "VERSION is not released yet" line, the
#      supported versions in SECURITY.md,
#   5. commits "Release VERSION",
#   6. builds build/release/ipmasq-agent-VERSION.tar.gz from that commit
#      (ansible-galaxy collection build),
#   7. runs galaxy-importer on it (scripts/galaxy_import.sh); if it refuses, the
#      release commit is undone and nothing is tagged,
#   8. writes ipmasq-agent-VERSION.tar.gz.sha256 beside it,
#   9. tags the commit VERSION, annotated, its message holding the tarball's
#      sha256 (how a tarball maps to its commit: docs/docsite/rst/releasing.rst).
# It pushes nothing: it prints the push command. Anything that fails before the
# commit leaves the tree as git has it (git checkout -- . undoes the edits);
# tests/install/test_release.py runs it on a scratch clone.
set -euo pipefail
die() { echo "release.sh: $*" >&2; exit 1; }
[ "$#" -eq 1 ] || die "usage: scripts/release.sh X.Y.Z"
version=$1
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$version is not a release version X.Y.Z"
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
venv=$here/.venv
[ -x "$venv/bin/antsibull-changelog" ] || die "no $venv/bin/antsibull-changelog: run scripts/bootstrap.sh"
export PATH="$venv/bin:$PATH"
[ "$(git rev-parse --show-toplevel)" = "$here" ] || die "$here is not the top of a git checkout"
[ -z "$(git status --porcelain)" ] || die "the tree has changes or untracked files: release from a clean checkout"
if git rev-parse -q --verify "refs/tags/$version" >/dev/null; then die "the tag $version exists already"; fi

# 1. May VERSION be released now?
python3=$venv/bin/python
"$python3" scripts/release_version.py check "$version" || die "$version cannot be released: see above"
last=$("$python3" -c 'import sys; sys.path.insert(0, "scripts"); import release_version as r; print((r.releases() or ["none"])[-1])')
tarname=ipmasq-agent-$version.tar.gz

# 2. galaxy.yml
sed -i -E "s/^version: .*/version: $version/" galaxy.yml
grep -qx "version: $version" galaxy.yml || die "galaxy.yml: could not set the version"

# 3. The notes. antsibull-changelog runs ansible-doc for the release's new
# plugins: it finds this checkout as ipmasq.agent through a link.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ansible_collections/ipmasq"
ln -s "$here" "$tmp/ansible_collections/ipmasq/agent"
ANSIBLE_COLLECTIONS_PATH=$tmp ANSIBLE_HOME=$tmp/ansible-home antsibull-changelog release --version "$version"

# 4. The docs that name the version.
sed -i -E "s/ipmasq-agent-[0-9]+\.[0-9]+\.[0-9]+\.tar\.gz/$tarname/g; s/ipmasq-ee:[0-9]+\.[0-9]+\.[0-9]+/ipmasq-ee:$version/g" \
  README.md docs/docsite/rst/*.rst
# upgrading.rst: the paragraph "VERSION is not released yet: ..." and the blank line after it.
sed -i "/^${version//./\\.} is not released yet/,/^\$/d" docs/docsite/rst/upgrading.rst
if grep -n 'not released yet' docs/docsite/rst/upgrading.rst; then die "upgrading.rst still says 'not released yet'"; fi
line=${version%.*}.x
if [ "$last" != none ]; then
  sed -i -E "s/^\| [0-9]+\.[0-9]+\.x, the latest release \|/| $line, the latest release |/; s/latest release line \([0-9]+\.[0-9]+\.x\)/latest release line ($line)/" SECURITY.md
fi
sed -i -E "s/^\| \`main\` \(the next release, ${version//./\\.}\) \|/| \`main\` (the next release) |/" SECURITY.md

# 5. The release commit.
git add -A
git -c core.hooksPath=/dev/null commit -q -m "Release $version"
commit=$(git rev-parse HEAD)

# 6. The tarball, from that commit (the tree is the commit: nothing untracked).
out=$here/build/release
mkdir -p "$out"
rm -f "$out/$tarname" "$out/$tarname.sha256"
ansible-galaxy collection build --output-path "$out" >/dev/null

# 7. Galaxy's importer.
if ! bash scripts/galaxy_import.sh "$out/$tarname"; then
  git reset -q --hard "$commit~1"
  die "galaxy-importer refused $tarname: the release commit is undone, nothing is tagged"
fi

# 8. The checksum.
(cd "$out" && sha256sum "$tarname" > "$tarname.sha256")
sum=$(cut -d' ' -f1 "$out/$tarname.sha256")

# 9. The tag.
git tag -a "$version" -m "ipmasq.agent $version

$tarname sha256 $sum
Built from this commit by scripts/release.sh (ansible-galaxy collection build)."
echo "release.sh: $version cut at ${commit:0:12}: $out/$tarname (sha256 $sum)"
echo "release.sh: publish with: git push origin HEAD $version; then upload $tarname and $tarname.sha256"
