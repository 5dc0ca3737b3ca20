"""Three agents coordinate through one project; the result is checked with plain git."""

from __future__ import annotations

from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.records import day_shard
from gitmail.storage.fsck import check_archive
from gitmail.storage.store import slug_for

from .conftest import git

PROJECT = "/work/shop"


def test_three_agent_workflow_is_plain_git(store):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name, task in (("GreenCastle", "API"), ("BlueLake", "Web UI"), ("RedStone", "Deploys")):
        mail.register_agent(PROJECT, "claude-code", "opus", name=name, task_description=task)
    mail.set_contact_policy(PROJECT, "RedStone", "open")

    # GreenCastle may not cold-mail BlueLake, so it asks; BlueLake approves.
    mail.request_contact(PROJECT, "GreenCastle", "BlueLake", reason="users API contract")
    intro = mail.fetch_inbox(PROJECT, "BlueLake")[0]
    mail.acknowledge_message(PROJECT, "BlueLake", intro["id"])
    mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True)

    plan = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Plan for /api/users",
                             "The quokka migration lands on Friday.\n\n- [ ] BlueLake: switch the form to v2\n",
                                 options=SendOptions(cc=["RedStone"], ack_required=True, importance="high",
                                                     topic="users-api"))["deliveries"][0]["payload"]

    inbox = mail.fetch_inbox(PROJECT, "BlueLake", include_bodies=True, urgent_only=True)
    assert [m["id"] for m in inbox] == [plan["id"]] and "quokka" in inbox[0]["body_md"]
    mail.acknowledge_message(PROJECT, "BlueLake", plan["id"])
    answer = mail.reply_message(PROJECT, plan["id"], "BlueLake", "Form switch is ready; TODO: remove v1 fields")
    mail.mark_message_read(PROJECT, "RedStone", plan["id"])
    ops = mail.reply_message(PROJECT, plan["id"], "RedStone", "Deploy window booked.",
                             options=SendOptions(cc=["BlueLake"],
                                                 ack_required=False))  # cc to BlueLake works: they share the thread

    assert mail.view_ack_required(PROJECT, "BlueLake")["count"] == 0
    assert mail.view_ack_required(PROJECT, "RedStone")["count"] == 1  # RedStone read but did not acknowledge
    thread = mail.get_thread(PROJECT, plan["id"])
    assert [m["id"] for m in thread["messages"]] == [plan["id"], answer["id"], ops["id"]]
    summary = mail.summarize_thread(PROJECT, plan["id"])["summary"]
    assert summary["participants"] == ["BlueLake", "GreenCastle", "RedStone"]
    assert "BlueLake: switch the form to v2" in summary["action_items"]
    assert "remove v1 fields" in summary["action_items"]

    # -- what a human sees with git alone -----------------------------------
    repo = store.paths(slug_for(PROJECT)).archive
    # The day, then two folders named by the ID's last two characters, then the file.
    shard = f"{day_shard(plan['id'])}/{plan['id'][-2]}/{plan['id'][-1]}"
    canonical = f"messages/{shard}/{plan['id']}.md"
    tree = git("--git-dir", repo, "ls-tree", "-r", "main", canonical,
               f"agents/BlueLake/inbox/{shard}/{plan['id']}.md", f"agents/RedStone/inbox/{shard}/{plan['id']}.md",
               f"agents/GreenCastle/outbox/{shard}/{plan['id']}.md")
    rows = [line.split() for line in tree.strip().splitlines()]
    assert len(rows) == 4
    assert len({row[2] for row in rows}) == 1  # one blob for the canonical file and every copy

    greens = git("--git-dir", repo, "log", "--author=GreenCastle", "--format=%s").splitlines()
    assert f"GreenCastle sent {plan['id']} to BlueLake, RedStone: Plan for /api/users" in greens
    assert "GreenCastle asked BlueLake for contact" in greens
    blues = git("--git-dir", repo, "log", "--author=BlueLake", "--format=%s").splitlines()
    assert "BlueLake approved contact from GreenCastle" in blues
    assert f"BlueLake acknowledged {plan['id']}" in blues
    assert any(line.startswith(f"BlueLake sent {answer['id']}") for line in blues)
    assert not any("GreenCastle sent" in line for line in blues)

    found = git("--git-dir", repo, "grep", "-l", "quokka migration", "main").split()
    assert f"main:{canonical}" in found
    assert f"main:agents/BlueLake/inbox/{shard}/{plan['id']}.md" in found
    shown = git("--git-dir", repo, "show", f"main:{canonical}")
    assert shown.startswith("---\n") and "from: GreenCastle" in shown and "ack_required: true" in shown

    assert check_archive(store.archive(PROJECT)) == []


def test_every_mail_record_type_passes_fsck(store):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("GreenCastle", "BlueLake", "RedStone", "Quiet"):
        mail.register_agent(PROJECT, "cli", "m", name=name)
    mail.set_contact_policy(PROJECT, "RedStone", "open")
    mail.set_contact_policy(PROJECT, "Quiet", "open")
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "held", "waits",
                      options=SendOptions(hold_if_blocked=True, idempotency_key="held-1"))
    sent = mail.send_message(PROJECT, "GreenCastle", ["RedStone"], "hi", "- [ ] task",
                             options=SendOptions(bcc=["Quiet"], idempotency_key="sent-1"))["deliveries"][0]["payload"]
    mail.acknowledge_message(PROJECT, "Quiet", sent["id"])
    mail.reply_message(PROJECT, sent["id"], "RedStone", "on it")
    mail.summarize_recent(PROJECT, since_hours=1)
    mail.hard_delete_agent(PROJECT, "RedStone", confirmation="I UNDERSTAND")
    snap = store.archive(PROJECT).snapshot()
    roles = {path.split("/")[2] if path.startswith("agents/") else path.split("/")[0] for path in snap.walk()}
    assert {"held", "idempotency", "summaries", "contacts", "tombstones", "receipts", "inbox", "outbox"} <= roles
    assert check_archive(store.archive(PROJECT)) == []
