"""Two machines share one project's mail through a bare hub repository, then a human reads it with git.

Run it from anywhere:

    python examples/two_machines.py

It makes two throw-away stores (a "laptop" and a "desktop", each its own
GITMAIL_HOME) and one bare hub repository with gitmail's checks installed,
and drives everything with the `gitmail` command as a person would: the
laptop creates the project and sends mail, the desktop joins through the hub
and replies, both write while apart and sync again. Then it shows the hub
with nothing but `git`: the history, the merge, a message file, a search.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

PROJECT = "/work/acme/backend"


def gitmail(home: str, *args: str) -> str:
    """Run `gitmail ARGS` on the store ``home``; stop with its message if it fails."""
    env = dict(os.environ, GITMAIL_HOME=home)
    proc = subprocess.run([sys.executable, "-m", "gitmail", *args], capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1):  # 1: synced, with something to look at
        raise SystemExit(f"gitmail {' '.join(args)} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc.stdout.strip()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def step(text: str) -> None:
    print(f"\n== {text}")


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        laptop, desktop = os.path.join(root, "laptop"), os.path.join(root, "desktop")
        hub = os.path.join(root, "hub.git")

        step("a bare hub with gitmail's checks (it refuses pushes that would damage the archive)")
        git("init", "-q", "--bare", "--initial-branch=main", hub)
        print(gitmail(laptop, "hooks", "install", "--hub", hub))

        step("the laptop creates the project, two agents and a first message, then syncs")
        gitmail(laptop, "init", PROJECT)
        for name in ("BlueLake", "GreenCastle"):
            gitmail(laptop, "register", PROJECT, "--name", name, "--policy", "open")
        sent = gitmail(laptop, "send", PROJECT, "--from", "BlueLake", "--to", "GreenCastle",
                       "--subject", "Schema for the users table", "--body", "Can you add an `email` column?")
        first = sent.split()[1]  # "sent <id> (thread <id>)"
        print(sent)
        gitmail(laptop, "remote", "add", PROJECT, "hub", hub)
        print(gitmail(laptop, "sync", PROJECT, "--quiet"))

        step("the desktop joins through the hub (no clone needed), reads and replies")
        gitmail(desktop, "remote", "add", PROJECT, "hub", hub)
        print(gitmail(desktop, "sync", PROJECT, "--quiet"))
        step("the laptop hands GreenCastle over to the desktop: only the desktop's key may sign for it now")
        with open(os.path.join(desktop, "node"), encoding="utf-8") as handle:  # each store names its node there
            desktop_node = handle.read().strip()
        gitmail(laptop, "nodes", "handover", PROJECT, "GreenCastle", desktop_node)
        print(gitmail(laptop, "sync", PROJECT, "--quiet"))
        print(gitmail(desktop, "sync", PROJECT, "--quiet"))
        print(f"GreenCastle's inbox on the desktop:\n{gitmail(desktop, 'inbox', PROJECT, 'GreenCastle')}")
        gitmail(desktop, "reply", PROJECT, first, "--from", "GreenCastle", "--body", "Done: migration 0042.")
        print(gitmail(desktop, "sync", PROJECT, "--quiet"))

        step("both write while apart, then sync: the records merge, nothing is lost")
        gitmail(laptop, "send", PROJECT, "--from", "BlueLake", "--to", "GreenCastle",
                "--subject", "Written on the laptop", "--body", "While the desktop was offline.")
        gitmail(desktop, "send", PROJECT, "--from", "GreenCastle", "--to", "BlueLake",
                "--subject", "Written on the desktop", "--body", "While the laptop was offline.")
        for home in (desktop, laptop, desktop):
            print(gitmail(home, "sync", PROJECT, "--quiet"))
        print(f"BlueLake's inbox on the laptop:\n{gitmail(laptop, 'inbox', PROJECT, 'BlueLake')}")
        print(f"the laptop's remotes:\n{gitmail(laptop, 'remote', 'list', PROJECT)}")
        same = git("--git-dir", hub, "rev-parse", "main^{tree}")
        trees = {git("--git-dir", os.path.join(home, "projects", _slug(home), "archive.git"), "rev-parse",
                     "main^{tree}") for home in (laptop, desktop)}
        print(f"laptop, desktop and hub hold the same tree: {trees == {same}}")

        step("a human reads the hub with plain git")
        print("$ git log --graph --format='%h %an: %s' main")
        print(git("--git-dir", hub, "log", "--graph", "--format=%h %an: %s", "main"))
        path = next(line for line in git("--git-dir", hub, "ls-tree", "-r", "--name-only", "main").splitlines()
                    if line.startswith("messages/") and first in line)
        print(f"\n$ git show main:{path}")
        print(git("--git-dir", hub, "show", f"main:{path}"))
        print("\n$ git grep -l offline main -- messages")
        print(git("--git-dir", hub, "grep", "-l", "offline", "main", "--", "messages"))


def _slug(home: str) -> str:
    (slug,) = os.listdir(os.path.join(home, "projects"))
    return slug


if __name__ == "__main__":
    main()
