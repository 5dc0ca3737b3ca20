"""Editing an archive by hand: a clone, an edit, ``git commit``, ``git push``, as a person would.

The archive's ``pre-receive`` hook judges each push with the record checker.
Edits a person may make (a profile's description, policies and fields of
their own, a contact link's answer, releasing a reservation) go through and
every gitmail read sees them at once; everything else is refused with the
file, the reason and what to do instead, and the archive stays as it was.
"""

from __future__ import annotations

import os

import pytest

from gitmail import GitmailError
from gitmail.mail.facade import Mail
from gitmail.model.records import (
    ChannelPost,
    MemoryDoc,
    channel_path,
    memory_path,
    message_path,
    post_path,
    profile_path,
    reservation_path,
)

from .conftest import git, git_run, sign_commits

pytestmark = pytest.mark.slow  # git runs the archive's hooks, which start gitmail

PROJECT = "/data/hand"


@pytest.fixture
def setting(store, tmp_path):
    """A project with two agents and a message, and a person's clone of its archive."""
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("BlueLake", "GreenCastle"):
        mail.register_agent(PROJECT, "codex", "gpt", name=name)
    mail.set_contact_policy(PROJECT, "GreenCastle", "open")
    sent = mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "the plan", "Ship on Friday.")
    message_id = sent["deliveries"][0]["payload"]["id"]
    clone = str(tmp_path / "clone")
    git("clone", "-q", store.archive(PROJECT).git_dir, clone)
    sign_commits(clone, store.home)
    return mail, store.archive(PROJECT), clone, message_id


def _edit(clone: str, path: str, old: str, new: str) -> None:
    full = os.path.join(clone, path)
    with open(full, encoding="utf-8") as handle:
        text = handle.read()
    assert old in text, text
    with open(full, "w", encoding="utf-8") as handle:
        handle.write(text.replace(old, new, 1))


def _push(clone: str, message: str):
    git("commit", "-qam", message, cwd=clone)
    return git_run("push", "origin", "HEAD:main", cwd=clone)


def _refused(archive, clone: str, pushed, *expected: str) -> None:
    """The push failed, saying each of ``expected``, and the archive is as it was."""
    before = git("rev-parse", "origin/main", cwd=clone).strip()
    assert pushed.returncode != 0, pushed.stderr
    for text in expected:
        assert text in pushed.stderr, pushed.stderr
    assert "what may be edited by hand: the README" in pushed.stderr
    assert archive.tip() == before
    git("reset", "-q", "--hard", "origin/main", cwd=clone)


def test_an_edited_message_body_is_refused_and_the_message_stays(setting):
    mail, archive, clone, message_id = setting
    path = message_path(message_id)
    _edit(clone, path, "Ship on Friday.", "Ship on Monday.")
    base = archive.tip()[:12]
    _refused(archive, clone, _push(clone, "fix the date"),
             f"gitmail: refused {path}: a message record is immutable and this changes it",
             f"what to do: put the file back as it was (git checkout {base} -- {path}) and commit",
             "gitmail send or gitmail reply")
    assert mail.get_message(PROJECT, message_id)["body_md"].strip() == "Ship on Friday."


def test_a_revert_that_deletes_a_message_is_refused_file_by_file(setting):
    mail, archive, clone, message_id = setting
    git("revert", "--no-edit", "HEAD", cwd=clone)  # the commit that sent the message
    pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
    for path in (message_path(message_id), f"agents/GreenCastle/inbox/{message_path(message_id)[9:]}",
                 f"agents/BlueLake/outbox/{message_path(message_id)[9:]}"):
        assert f"gitmail: refused {path}: deleted without a tombstone" in pushed.stderr, pushed.stderr
    _refused(archive, clone, pushed, "push refused (3 problem(s)); nothing was changed here",
             "if a git revert removed it, revert only the files you meant to change", "purge_old_messages")
    assert mail.get_message(PROJECT, message_id)["subject"] == "the plan"


def test_a_yaml_typo_in_a_profile_is_refused_pointing_at_the_line(setting):
    mail, archive, clone, _ = setting
    path = profile_path("GreenCastle")
    _edit(clone, path, "model: gpt", "model gpt")
    with open(os.path.join(clone, path), encoding="utf-8") as handle:
        line = handle.read().splitlines().index("model gpt") + 1
    _refused(archive, clone, _push(clone, "typo"),
             f"gitmail: refused {path}: invalid YAML at line {line} ('model gpt'): could not find expected ':'",
             "what to do: correct the line or field named, or put the file back as it was")
    assert [a["name"] for a in mail.list_agents(PROJECT)] == ["BlueLake", "GreenCastle"]


def test_fields_only_gitmail_changes_are_refused_with_the_ones_a_person_may(setting):
    mail, archive, clone, _ = setting
    path = profile_path("GreenCastle")
    with open(os.path.join(clone, path), encoding="utf-8") as handle:
        token_line = next(line for line in handle.read().splitlines() if line.startswith("token_hash:"))
    _edit(clone, path, token_line, "token_hash: sha256:" + "0" * 64)
    _refused(archive, clone, _push(clone, "take over"),
             f"gitmail: refused {path}: changes token_hash of this agent, which only gitmail changes",
             "by hand a agent may change only attachments_policy, capabilities, contact_policy, model, program, "
             "task_description", "gitmail agents reset-token")


def test_a_person_edits_a_profile_and_gitmail_reads_it_at_once(setting):
    mail, archive, clone, _ = setting
    path = profile_path("BlueLake")
    _edit(clone, path, "task_description: ''", "task_description: reviews the parser")
    _edit(clone, path, "contact_policy: auto", "contact_policy: block_all")
    with open(os.path.join(clone, path), "a", encoding="utf-8") as handle:
        handle.write("x-team: parsing\n")
    git("commit", "-qam", "what BlueLake does, and that it takes no mail for now", cwd=clone)
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "before", "still welcome")  # main moves on meanwhile
    assert "fetch first" in git_run("push", "origin", "HEAD:main", cwd=clone).stderr
    git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=clone)  # a merge keeps both sides
    pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
    assert pushed.returncode == 0, pushed.stderr
    whois = mail.whois(PROJECT, "BlueLake", include_recent_commits=False)
    assert (whois["task_description"], whois["contact_policy"]) == ("reviews the parser", "block_all")
    with pytest.raises(GitmailError) as refused:  # the policy is in force
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "after", "not any more")
    assert "BlueLake" in refused.value.message
    assert [m["subject"] for m in mail.fetch_inbox(PROJECT, "BlueLake")] == ["before"]
    # gitmail's own later update keeps the person's field.
    mail.register_agent(PROJECT, None, None, name="BlueLake", task_description="reviews the lexer too")
    git("pull", "-q", "--ff-only", cwd=clone)
    with open(os.path.join(clone, path), encoding="utf-8") as handle:
        text = handle.read()
    assert "x-team: parsing" in text and "task_description: reviews the lexer too" in text


def test_a_person_releases_a_reservation_by_hand(setting, store):
    mail, archive, clone, _ = setting
    granted = mail.file_reservation_paths(PROJECT, "BlueLake", ["src/*.py"])["granted"][0]
    assert mail.file_reservation_paths(PROJECT, "GreenCastle", ["src/a.py"])["conflicts"]
    git("pull", "-q", "--ff-only", cwd=clone)
    path = reservation_path(granted["id"])
    released = store.clock.now_ts()
    with open(os.path.join(clone, path), "a", encoding="utf-8") as handle:
        handle.write(f"released_ts: '{released}'\n")
    pushed = _push(clone, "BlueLake is done with the parser")
    assert pushed.returncode == 0, pushed.stderr
    assert mail.list_file_reservations(PROJECT)["file_reservations"] == []
    assert mail.file_reservation_paths(PROJECT, "GreenCastle", ["src/a.py"])["granted"]
    # A release is final: taking it back by hand is refused.
    git("pull", "-q", "--ff-only", cwd=clone)
    _edit(clone, path, f"released_ts: '{released}'\n", "")
    _refused(archive, clone, _push(clone, "not done after all"),
             f"gitmail: refused {path}: changes a reservation that was already released (a release is final)",
             "reserve them anew (gitmail reserve)")


def test_hand_edits_of_a_channel_are_refused_and_posts_stay_as_written(setting, store):
    mail, archive, clone, _ = setting
    mail.create_channel(PROJECT, "BlueLake", "deploys", purpose="what ships")
    post_id = mail.post_channel(PROJECT, "BlueLake", "deploys", "v1 is out")["id"]
    git("pull", "-q", "--ff-only", cwd=clone)
    _edit(clone, post_path("deploys", post_id), "v1 is out", "v2 is out")
    _edit(clone, channel_path("deploys"), "what ships", "what broke")
    stray = ChannelPost(id=store.clock.new_id(), channel="ghost", sender="BlueLake", created_ts=store.clock.now_ts(),
                        body="to nowhere")
    os.makedirs(os.path.dirname(os.path.join(clone, stray.path())))
    with open(os.path.join(clone, stray.path()), "wb") as handle:
        handle.write(stray.to_bytes())
    git("add", "-A", cwd=clone)
    _refused(archive, clone, _push(clone, "tidy the channel"),
             f"gitmail: refused {post_path('deploys', post_id)}: a post record is immutable and this changes it",
             f"gitmail: refused {channel_path('deploys')}: changes the definition of channel deploys",
             f"gitmail: refused {stray.path()}: a post to channel ghost, which this archive does not define")
    assert mail.read_channel(PROJECT, "GreenCastle", "deploys")["posts"][0]["body_md"].strip() == "v1 is out"


def test_a_person_writes_and_edits_the_projects_memory_folders_by_hand_naming_a_manager(setting, store):
    mail, archive, clone, _ = setting
    mail.spawn_agent(PROJECT, "BlueLake", ["viewer@*"], name="Reader")
    mail.write_memory(PROJECT, "BlueLake", folder="ops", file="AGENTS.md", text="Page the lead.\n")
    git("pull", "-q", "--ff-only", cwd=clone)
    _edit(clone, memory_path("ops", "AGENTS.md"), "Page the lead.", "Page the lead, then the on-call.")
    skill = MemoryDoc(folder="ops", file="skills/rollback/SKILL.md", written_by="GreenCastle",
                      updated_at=store.clock.now_ts(), hlc=store.clock.tick(), body="# Roll a release back\n")
    os.makedirs(os.path.dirname(os.path.join(clone, skill.path())))
    with open(os.path.join(clone, skill.path()), "wb") as handle:
        handle.write(skill.to_bytes())
    git("add", "-A", cwd=clone)
    assert _push(clone, "the on-call rule and a rollback skill").returncode == 0
    mail.spawn_agent(PROJECT, "BlueLake", ["viewer@*"], name="Loader", load_memory_and_skills=["archive:ops"])
    loads = mail.take_seat(PROJECT, "Loader")["loads"]
    assert [m["text"] for m in loads["memory"]] == ["Page the lead, then the on-call.\n"]
    assert [(s["name"], s["description"]) for s in loads["skills"]] == [("rollback", "Roll a release back")]
    # The skill removed by hand: kept as a version with no text that says so, in a manager's name.
    git("pull", "-q", "--ff-only", cwd=clone)
    _edit(clone, skill.path(), "---\n\n# Roll a release back\n", "removed: true\n---\n")
    assert _push(clone, "the rollback skill is retired").returncode == 0
    assert mail.take_seat(PROJECT, "Loader", take_over=True)["loads"]["skills"] == []
    git("pull", "-q", "--ff-only", cwd=clone)
    git("rm", "-q", memory_path("ops", "AGENTS.md"), cwd=clone)
    _refused(archive, clone, _push(clone, "drop the rule"),
             f"gitmail: refused {memory_path('ops', 'AGENTS.md')}: a memory file deleted outright", "removed: true")
    git("reset", "-q", "--hard", "origin/main", cwd=clone)
    _edit(clone, memory_path("ops", "AGENTS.md"), "written_by: BlueLake", "written_by: Reader")
    _refused(archive, clone, _push(clone, "the reader's rule"),
             f"gitmail: refused {memory_path('ops', 'AGENTS.md')}: written by Reader, who is no agent of this "
             "project holding manager@*", "write_memory")
