"""Galaxy's importer (galaxy-importer, what Galaxy and Automation Hub run on an
upload) accepts the tarball built from this tree: scripts/galaxy_import.sh, with
tests/galaxy-importer.cfg (offline: ansible-test in a container is off, sanity
runs in tests/sanity.sh), from .venv-importer (scripts/bootstrap.sh).

The build runs in a scratch copy of the tracked and new files, HOME empty, so
nothing of this tree's build/ or of ~/.ansible is seen.
"""
import os
import shutil
import subprocess

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, '.venv', 'bin')


def clean_env(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(HOME=str(home), PATH=BIN + os.pathsep + env.get('PATH', '/usr/bin:/bin'))
    return env


def copy_tree(dest):
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split('\0')
    for rel in filter(None, files):
        if os.path.exists(os.path.join(ROOT, rel)):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), dest / rel, follow_symlinks=False)


def build(src, home):
    out = src.parent / ('dist-%s' % src.name)
    proc = subprocess.run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(out)],
                          cwd=str(src), env=clean_env(home), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(src / 'galaxy.yml') as handle:
        version = yaml.safe_load(handle)['version']
    return out / ('ipmasq-agent-%s.tar.gz' % version)


def galaxy_import(tarball, home):
    return subprocess.run(['bash', os.path.join(ROOT, 'scripts', 'galaxy_import.sh'), str(tarball)],
                          env=clean_env(home), capture_output=True, text=True, timeout=600, check=False)


def test_galaxy_importer_accepts_the_tarball_built_from_this_tree(tmp_path):
    src = tmp_path / 'src'
    copy_tree(src)
    (tmp_path / 'home').mkdir()
    tarball = build(src, tmp_path / 'home')
    proc = galaxy_import(tarball, tmp_path / 'home')
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert 'Importer processing completed successfully' in out
    # The parts tests/galaxy-importer.cfg switches on did run.
    assert 'Getting doc strings via ansible-doc' in out and 'Linting collection via ansible-lint' in out, out
    assert 'imports cleanly' in out


def test_the_import_fails_on_what_galaxy_refuses(tmp_path):
    """The check can fail: without ``repository`` (as at eaef342) the importer
    refuses the tarball, and so does scripts/galaxy_import.sh."""
    src = tmp_path / 'src'
    copy_tree(src)
    with open(src / 'galaxy.yml') as handle:
        text = handle.read()
    (src / 'galaxy.yml').write_text(''.join(ln for ln in text.splitlines(True) if not ln.startswith('repository:')))
    (tmp_path / 'home').mkdir()
    proc = galaxy_import(build(src, tmp_path / 'home'), tmp_path / 'home')
    assert proc.returncode != 0
    assert "'repository' is required" in proc.stdout + proc.stderr
