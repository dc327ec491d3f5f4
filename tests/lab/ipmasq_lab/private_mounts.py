"""Run a command in a mount namespace of its own, as on a node where some
tools are not installed and some directories are read-only (EROFS: a real
failure of the kernel's, not a hook in our code).

    python3 private_mounts.py [--hide PATH]... [--read-only DIR]... -- argv...

It re-runs itself under ``unshare --mount --propagation private`` (a mount
namespace of its own, whose mounts never reach the machine's), then:

- covers each ``--hide`` PATH with a bind mount of /dev/null (not
  executable: tool lookups pass it over);
- bind-mounts each ``--read-only`` DIR onto itself and remounts that bind
  read-only (only directories the test made below its own temporary
  directory are given);

then runs argv.
"""
import os
import subprocess
import sys

MARK = 'IMQ_PRIVATE_MOUNTS'


def parse(args):
    """``(hide, read_only, argv)`` of the command line after the script's name."""
    sep = args.index('--')
    hide, read_only = [], []
    options = args[:sep]
    for flag, value in zip(options[::2], options[1::2]):
        {'--hide': hide, '--read-only': read_only}[flag].append(value)
    return hide, read_only, args[sep + 1:]


def main():
    if os.environ.get(MARK) != str(os.getpid()):
        # Not yet in a mount namespace of our own: unshare execs python, which keeps this pid.
        env = dict(os.environ)
        env[MARK] = str(os.getpid())
        os.execve('/usr/bin/unshare', ['unshare', '--mount', '--propagation', 'private',
                                       sys.executable] + sys.argv, env)
    hide, read_only, argv = parse(sys.argv[1:])
    for path in hide:
        subprocess.run(['mount', '--bind', '/dev/null', path], check=True)
    for path in read_only:
        subprocess.run(['mount', '--bind', path, path], check=True)
        subprocess.run(['mount', '-o', 'remount,bind,ro', path, path], check=True)
    del os.environ[MARK]
    os.execvp(argv[0], argv)


if __name__ == '__main__':
    main()
