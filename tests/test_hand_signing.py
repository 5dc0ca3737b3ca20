"""A person's hand commits from the checkout, signed with their own key: ``gitmail checkout PROJECT --sign-with``.

A person makes an SSH key (``ssh-keygen``), the operator registers it
(``gitmail nodes add --human``), and ``gitmail checkout --sign-with`` sets the
checkout's git to sign with it. Then a plain ``git commit`` of an edit the
record checker allows is signed, verified by plain git with the exported
allowed-signers file, and accepted by the archive's ``pre-receive`` and by a
checked hub's, both run by the real ``git`` (the hub learning the key from
its registration in the same push). The same edit unsigned is
refused at both, naming the command that registers the key.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from click.testing import CliRunner

from gitmail.cli import cli
from gitmail.mail.facade import Mail
from gitmail.model.records import profile_path
from gitmail.storage import nodes
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git, git_run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # git runs the hooks, which start gitmail

PROJECT = "/data/hand-signed"


def _edit(checkout: str, old: str, new: str) -> None:
    full = os.path.join(checkout, profile_path("BlueLake"))
    with open(full, encoding="utf-8") as handle:
        text = handle.read()
    with open(full, "w", encoding="utf-8") as handle:
        handle.write(text.replace(old, new, 1) if old else text.rstrip("\n") + f"\ntask_description: {new}\n")


def test_a_persons_checkout_signs_hand_commits_that_every_door_accepts(store, tmp_path):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    mail.register_agent(PROJECT, "codex", "gpt", name="BlueLake")
    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    key = str(tmp_path / "ada_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ada", "-f", key], check=True)
    with open(key + ".pub", encoding="utf-8") as handle:
        public = " ".join(handle.read().split()[:2])

    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    install_hub(hub)
    add_remote(store, PROJECT, "hub", "file://" + hub)
    assert sync_project(store, PROJECT).exit_code == 0

    unregistered = CliRunner().invoke(cli, ["checkout", PROJECT, "--sign-with", key])
    assert unregistered.exit_code != 0
    assert f"gitmail nodes add {slug} NAME --key '{public}' --human" in unregistered.output, unregistered.output
    nodes.add(archive, name="ada", key=public, human=True, by=store.node, now=store.clock.now_ts())
    configured = CliRunner().invoke(cli, ["checkout", PROJECT, "--sign-with", key])
    assert configured.exit_code == 0 and "signs as ada" in configured.output, configured.output
    checkout = store.paths(slug).checkout
    assert git("config", "commit.gpgsign", cwd=checkout).strip() == "true"
    assert git("config", "user.signingkey", cwd=checkout).strip() == key

    # Signed by the person's key: plain git verifies it, the archive takes it, and so does the checked hub (which
    # learns the key from the registration arriving in the same push).
    _edit(checkout, "", "parsing the logs")
    git("commit", "-qam", "Describe BlueLake's task", cwd=checkout)
    verified = git_run("verify-commit", "HEAD", cwd=checkout)
    assert verified.returncode == 0 and 'Good "git" signature for ada' in verified.stderr, verified.stderr
    pushed = git_run("push", "origin", "HEAD:main", cwd=checkout)
    assert pushed.returncode == 0, pushed.stderr
    signed = git("rev-parse", "HEAD", cwd=checkout).strip()
    assert archive.tip() == signed
    (synced,) = sync_project(store, PROJECT).results
    assert synced.error is None and synced.pushed, synced.error
    assert git("--git-dir", hub, "rev-parse", "main").strip() == signed
    assert mail.whois(PROJECT, "BlueLake")["task_description"] == "parsing the logs"

    # The same kind of edit unsigned: refused at the archive and at the hub, naming the command that registers a key.
    _edit(checkout, "parsing the logs", "parsing the traces")
    git("-c", "commit.gpgsign=false", "commit", "-qam", "Describe it again, unsigned", cwd=checkout)
    for target in ("origin", hub):
        refused = git_run("push", target, "HEAD:main", cwd=checkout)
        assert refused.returncode != 0 and "[unsigned]" in refused.stderr, refused.stderr
        assert "gitmail nodes add PROJECT NAME --key 'ssh-ed25519 ...' --human" in refused.stderr, refused.stderr
    assert archive.tip() == signed and git("--git-dir", hub, "rev-parse", "main").strip() == signed


def _keygen(path: str, comment: str) -> str:
    """A person's new SSH key at ``path``; its public line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path], check=True)
    with open(path + ".pub", encoding="utf-8") as handle:
        return " ".join(handle.read().split()[:2])


def test_a_signing_checkouts_allowed_signers_follow_the_keys_registered_and_revoked(store, tmp_path):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    mail.register_agent(PROJECT, "codex", "gpt", name="BlueLake")
    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    ada, bob = str(tmp_path / "ada_ed25519"), str(tmp_path / "bob_ed25519")
    nodes.add(archive, name="ada", key=_keygen(ada, "ada"), human=True, by=store.node, now=store.clock.now_ts())
    bob_public = _keygen(bob, "bob")
    assert CliRunner().invoke(cli, ["checkout", PROJECT, "--sign-with", ada]).exit_code == 0
    checkout = store.paths(slug).checkout

    def refreshed() -> str:  # gitmail refreshing the checkout, as after any commit or sync
        done = CliRunner().invoke(cli, ["checkout", PROJECT])
        assert done.exit_code == 0, done.output
        return done.output

    _edit(checkout, "", "bob's first look")
    git("-c", f"user.signingkey={bob}", "commit", "-qam", "Bob's edit", cwd=checkout)
    by_bob = git("rev-parse", "HEAD", cwd=checkout).strip()
    assert git_run("verify-commit", by_bob, cwd=checkout).returncode != 0  # bob is no one here yet
    nodes.add(archive, name="bob", key=bob_public, human=True, by=store.node, now=store.clock.now_ts())
    assert git_run("verify-commit", by_bob, cwd=checkout).returncode != 0  # not until gitmail refreshes the checkout
    assert "held" in refreshed()  # bob's commit is ahead of main: the files are left be, the signers are not
    verified = git_run("verify-commit", by_bob, cwd=checkout)
    assert verified.returncode == 0 and 'Good "git" signature for bob' in verified.stderr, verified.stderr

    _edit(checkout, "bob's first look", "ada's second look")
    git("commit", "-qam", "Ada's edit", cwd=checkout)
    by_ada = git("rev-parse", "HEAD", cwd=checkout).strip()
    assert git_run("verify-commit", by_ada, cwd=checkout).returncode == 0
    nodes.revoke(archive, name="ada", reason="laptop lost", by=store.node, now=store.clock.now_ts())
    refreshed()
    assert git_run("verify-commit", by_ada, cwd=checkout).returncode != 0  # the revoked key is out
    assert git_run("verify-commit", by_bob, cwd=checkout).returncode == 0
