"""Run a command with some directories read-only, as on a node whose
filesystem refuses a write there (EROFS: a real failure of the kernel's,
not a hook in our code).

    python3 read_only.py DIR ... -- argv...

It re-runs itself under ``unshare --mount --propagation private`` (a mount
namespace of its own, whose mounts never reach the machine's), bind-mounts
each DIR onto itself and remounts that bind read-only, then runs argv. Only
directories the test made below its own temporary directory are given.
"""
import os
import subprocess
import sys

MARK = 'IMQ_READ_ONLY'


def main():
    if os.environ.get(MARK) != str(os.getpid()):
        # Not yet in a mount namespace of our own: unshare execs python, which keeps this pid.
        env = dict(os.environ)
        env[MARK] = str(os.getpid())
        os.execve('/usr/bin/unshare', ['unshare', '--mount', '--propagation', 'private',
                                       sys.executable] + sys.argv, env)
    sep = sys.argv.index('--')
    paths, argv = sys.argv[1:sep], sys.argv[sep + 1:]
    for path in paths:
        subprocess.run(['mount', '--bind', path, path], check=True)
        subprocess.run(['mount', '-o', 'remount,bind,ro', path, path], check=True)
    del os.environ[MARK]
    os.execvp(argv[0], argv)


if __name__ == '__main__':
    main()
