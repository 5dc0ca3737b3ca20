"""Mail commands: projects, agents, sending, reading and searching from a shell.

Each command is a thin call into :class:`gitmail.mail.facade.Mail` on the local
store. The shell user owns the store's files, so no agent token is asked for.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from typing import Any

import click

from gitmail.model.errors import INVALID_ARGUMENT, GitmailError, invalid
from gitmail.model.limits import CATCH_UP_DEFAULT, CATCH_UP_MAX, FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT, FEED_MAX_WAIT

from ._app import Context, cli, command


def table(rows: Iterable[dict[str, Any]], columns: list[tuple[str, str]], empty: str) -> str:
    """Rows as left-aligned text columns under a header."""
    rows = list(rows)
    if not rows:
        return empty
    cells = [[str(row.get(key) if row.get(key) is not None else "") for key, _ in columns] for row in rows]
    widths = [max(len(title), *(len(line[i]) for line in cells)) for i, (_, title) in enumerate(columns)]
    lines = ["  ".join(title.ljust(widths[i]) for i, (_, title) in enumerate(columns)).rstrip()]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in cells]
    return "\n".join(lines)


def body_text(body: str | None, body_file: str | None, *, what: str = "body") -> str:
    """The message body (or other ``what``) from --body, --body-file (``-`` for standard input), or standard input;
    the options are named ``--<what>`` and ``--<what>-file``."""
    if body is not None and body_file is not None:
        raise click.UsageError(f"give --{what} or --{what}-file, not both")
    if body is not None:
        return body
    if body_file is not None and body_file != "-":
        with open(body_file, encoding="utf-8") as handle:
            return handle.read()
    if body_file == "-" or not sys.stdin.isatty():
        return sys.stdin.read()
    raise click.UsageError(f"give the {what} with --{what} TEXT, --{what}-file FILE, or on standard input")


def render_message(message: dict[str, Any]) -> str:
    head = [f"id:       {message['id']}", f"from:     {message.get('from')}",
            f"to:       {', '.join(message.get('to') or [])}"]
    if message.get("cc"):
        head.append(f"cc:       {', '.join(message['cc'])}")
    head += [f"subject:  {message.get('subject')}", f"date:     {message.get('created_ts')}",
             f"thread:   {message.get('thread_id')}"]
    flags = [message.get("importance") or "normal"] + (["ack required"] if message.get("ack_required") else [])
    head.append(f"flags:    {', '.join(flags)}")
    return "\n".join(head) + "\n\n" + (message.get("body_md") or "")


INBOX_COLUMNS = [("id", "ID"), ("created_ts", "DATE"), ("from", "FROM"), ("importance", "IMPORTANCE"),
                 ("subject", "SUBJECT")]


@command(name="init")
@click.argument("project_key")
def init(ctx: Context, project_key: str) -> tuple[object, str]:
    """Create the project named by an absolute path (a no-op if it exists).

    Prints the project's slug and where its archive and checkout live.
    """
    project = ctx.mail.ensure_project(project_key)
    paths = ctx.store.paths(project.slug)
    data = dict(project, archive=paths.archive, checkout=paths.checkout)
    return data, f"project {project.slug}\n  archive  {paths.archive}\n  checkout {paths.checkout}"


@command(name="projects")
@click.option("--all", "include_archived", is_flag=True, help="Include archived projects.")
def projects(ctx: Context, include_archived: bool) -> tuple[object, str]:
    """List the projects in the store."""
    listed = ctx.mail.list_projects(include_archived=include_archived)
    columns = [("slug", "SLUG"), ("human_key", "KEY"), ("created_at", "CREATED"), ("archived_at", "ARCHIVED")]
    return listed, table(listed, columns, "no projects yet; create one with `gitmail init /abs/path`")


class _AgentsGroup(click.Group):
    """``gitmail agents PROJECT`` lists (as it always did); ``gitmail agents reset-token ...`` is a subcommand."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                           list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["list", *args]
        return super().resolve_command(ctx, args)


@cli.group(name="agents", cls=_AgentsGroup)
def agents_group() -> None:
    """A project's agents: list them (`gitmail agents PROJECT`), or issue a lost token anew."""


@command(group=agents_group, name="list")
@click.argument("project")
@click.option("--all", "include_retired", is_flag=True, help="Include retired and deregistered agents.")
def agents(ctx: Context, project: str, include_retired: bool) -> tuple[object, str]:
    """List the agents of PROJECT (a human key or slug)."""
    listed = ctx.mail.list_agents(project, active_only=not include_retired)
    return listed, table(listed, [("name", "NAME"), ("program", "PROGRAM"), ("model", "MODEL"), ("status", "STATUS"),
                                  ("last_active_ts", "LAST ACTIVE"), ("task_description", "TASK")],
                         "no agents registered")


@command(group=agents_group, name="reset-token")
@click.argument("project")
@click.argument("name")
def reset_token(ctx: Context, project: str, name: str) -> tuple[object, str]:
    """Issue a new registration token for agent NAME of PROJECT and print it once; the old token stops working.

    For an agent whose token is lost: only the token's hash is stored, so it
    cannot be shown again. Give the new token to the agent's next session.
    """
    issued = ctx.mail.reset_agent_token(project, name)
    return issued, (f"new registration token for {issued.agent} (shown once; the old one no longer works):\n"
                    f"{issued.registration_token}")


@command(name="register")
@click.argument("project")
@click.option("--name", default=None, help="Agent name (default: a generated adjective+noun name).")
@click.option("--program", default=None, help="The program acting as the agent (a new agent: cli).")
@click.option("--model", default=None, help="The model (or person) behind it (a new agent: human).")
@click.option("--task", "task_description", default=None, help="What the agent works on.")
@click.option("--policy", type=click.Choice(["open", "auto", "contacts_only", "block_all"]), default=None,
              help="Also set who may write to the agent.")
def register(ctx: Context, project: str, name: str | None, program: str | None, model: str | None,
             task_description: str | None, policy: str | None) -> tuple[object, str]:
    """Register an agent in PROJECT and print its token once; for an existing agent, update the options given.

    An existing agent keeps every field not given here, and its token: the
    archive holds only the token's hash, so it cannot be printed again (issue
    a new one with `gitmail agents reset-token PROJECT NAME`).
    """
    mail = ctx.mail
    exists = name is not None and any(a.name.lower() == name.lower()
                                      for a in mail.list_agents(project, active_only=False))
    if not exists:
        program, model = program or "cli", model or "human"
    made = mail.register_agent(project, program, model, name=name, task_description=task_description)
    if policy:
        chosen = mail.set_contact_policy(project, made.profile.name, policy).policy
        made = dataclasses.replace(made, profile=dataclasses.replace(made.profile, contact_policy=chosen))
    agent, token = made.profile.name, made.registration_token
    if token:
        text = f"agent {agent} in {project}\nregistration token (shown once): {token}"
    else:
        text = (f"agent {agent} in {project} updated; its token is unchanged (only its hash is kept: "
                f"`gitmail agents reset-token {project} {agent}` issues a new one)")
    return made, text


@command(name="send")
@click.argument("project")
@click.option("--from", "sender", default=None, help="The sending agent.")
@click.option("--as-overseer", "as_overseer", is_flag=True,
              help="Send as the project's human overseer (not subject to contact policy; agents reply to it).")
@click.option("--broadcast", is_flag=True, help="Send to every active agent of the project.")
@click.option("--to", "to", multiple=True, help="A recipient (repeat for several).")
@click.option("--cc", multiple=True, help="A copy recipient (repeatable).")
@click.option("--bcc", multiple=True, help="A hidden recipient (repeatable).")
@click.option("--subject", required=True, help="The subject line.")
@click.option("--body", default=None, help="The Markdown body (or use --body-file / standard input).")
@click.option("--body-file", default=None, help="Read the body from this file ('-' for standard input).")
@click.option("--attach", "attach", multiple=True, help=(
    "Attach a file (repeatable): a path inside the archive, or an absolute path under GITMAIL_ATTACHMENT_ROOTS."))
@click.option("--importance", default="normal", show_default=True,
              help="low, normal, high or urgent (high and urgent show as urgent), or another short label.")
@click.option("--ack", "ack_required", is_flag=True, help="Ask recipients to acknowledge.")
@click.option("--thread", "thread_id", default=None, help="Continue this thread.")
@click.option("--topic", default=None, help="Tag the message with a topic.")
def send(ctx: Context, project: str, sender: str | None, as_overseer: bool, broadcast: bool, to: tuple[str, ...],
         cc: tuple[str, ...], bcc: tuple[str, ...], subject: str, body: str | None, body_file: str | None,
         attach: tuple[str, ...], importance: str, ack_required: bool, thread_id: str | None,
         topic: str | None) -> tuple[object, str]:
    """Send a message in PROJECT as an agent (--from) or as the human overseer (--as-overseer); prints its ID."""
    if (sender is None) == (not as_overseer):
        raise invalid("name the sender with --from AGENT, or send as the human overseer with --as-overseer "
                      "(one of the two)", field="from")
    if not (to or cc or bcc or broadcast):
        raise click.UsageError("name a recipient with --to, --cc or --bcc, or send to every agent with --broadcast")
    from gitmail.mail.facade import SendOptions

    options = SendOptions(cc=list(cc), bcc=list(bcc), importance=importance, ack_required=ack_required,
                          thread_id=thread_id, topic=topic, broadcast=broadcast,
                          attachment_paths=list(attach) or None)
    text = body_text(body, body_file)
    if as_overseer:
        result = ctx.mail.send_as_overseer(project, list(to), subject, text, options)
    else:
        assert sender is not None
        result = ctx.mail.send_message(project, sender, list(to), subject, text, options)
    sent = result.message
    assert sent is not None  # a send from here is never held (hold_if_blocked is not offered)
    skipped = result.broadcast_skipped or []
    note = f"; skipped {', '.join(s.agent for s in skipped)}" if skipped else ""
    return result, f"sent {sent.id} (thread {sent.thread_id}){note}"


@command(name="inbox")
@click.argument("project")
@click.argument("agent")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="At most this many.")
@click.option("--unread", "unread_only", is_flag=True, help="Only messages not yet read.")
@click.option("--urgent", "urgent_only", is_flag=True, help="Only high and urgent messages.")
@click.option("--bodies", "include_bodies", is_flag=True, help="Include the bodies (with --json).")
def inbox(ctx: Context, project: str, agent: str, limit: int, unread_only: bool, urgent_only: bool,
          include_bodies: bool) -> tuple[object, str]:
    """List AGENT's newest messages in PROJECT, newest first (read state unchanged)."""
    listed = ctx.mail.fetch_inbox(project, agent, limit=limit, urgent_only=urgent_only,
                                    include_bodies=include_bodies, unread_only=unread_only)
    rows = [dict(m, subject=("  " if m.get("read_at") else "* ") + m["subject"]) for m in listed]
    return listed, table(rows, INBOX_COLUMNS, "inbox is empty")


FEED_COLUMNS = [("seq", "SEQ"), ("id", "ID"), ("created_ts", "DATE"), ("from", "FROM"), ("subject", "SUBJECT")]


@command(name="catch-up")
@click.argument("project")
@click.argument("agent")
@click.option("--limit", default=CATCH_UP_DEFAULT, show_default=True, type=click.IntRange(1, CATCH_UP_MAX),
              help="How many of the newest arrivals to show.")
def catch_up(ctx: Context, project: str, agent: str, limit: int) -> tuple[object, str]:
    """Show AGENT's newest arrivals, oldest first, and the cursor to continue with `gitmail feed`.

    Arrivals are numbered in the order this machine received them, so mail
    pulled by a sync today counts as new even if it was written earlier.
    Reading changes no read state. --json includes the bodies.
    """
    found = ctx.mail.catch_up(project, agent, limit=limit)
    lines = [table(found.messages, FEED_COLUMNS, "no messages")]
    if found.older_messages:
        lines.append("older messages are not shown (gitmail search reaches them)")
    lines.append(f"cursor {found.next_after}: continue with gitmail feed {project} {found.agent} "
                 f"--after {found.next_after}")
    return found, "\n".join(lines)


@command(name="feed")
@click.argument("project")
@click.argument("agent")
@click.option("--after", default=0, show_default=True, type=click.IntRange(min=0),
              help="The cursor you saved: show what arrived after it (0: from the oldest).")
@click.option("--limit", default=FEED_DEFAULT_LIMIT, show_default=True, type=click.IntRange(1, FEED_MAX_LIMIT),
              help="At most this many messages.")
@click.option("--wait", "wait_seconds", default=0.0, show_default=True, type=click.FloatRange(0, FEED_MAX_WAIT),
              help="If nothing is new, wait up to this many seconds for the next arrival.")
def feed(ctx: Context, project: str, agent: str, after: int, limit: int, wait_seconds: float) -> tuple[object, str]:
    """Show AGENT's messages that arrived after the cursor --after, whole and oldest first.

    Prints the cursor to pass next; a cursor this machine never handed out
    fails with CURSOR_AHEAD (start again with `gitmail catch-up`). Reading
    changes no read state.
    """
    page = ctx.mail.read_messages(project, agent, after=after, limit=limit, wait_seconds=wait_seconds)
    shown = [f"[{m.seq}] " + render_message(m) for m in page.messages]
    text = f"\n\n{'-' * 72}\n\n".join(shown) or f"nothing new after {after}"
    more = "; more are waiting, run it again" if page.has_more else ""
    return page, f"{text}\n\ncursor {page.next_after}: continue with --after {page.next_after}{more}"


@command(name="read")
@click.argument("project")
@click.argument("message_id")
@click.option("--as", "agent", default=None, help="Also mark the message read for this recipient.")
def read(ctx: Context, project: str, message_id: str, agent: str | None) -> tuple[object, str]:
    """Show one message in full; with --as AGENT, mark it read for that recipient."""
    mail = ctx.mail
    message = mail.get_message(project, message_id)
    if agent:  # the message as shown, and the receipt its reading made
        return {**message, "receipt": mail.mark_message_read(project, agent, message_id)}, render_message(message)
    return message, render_message(message)


@command(name="reply")
@click.argument("project")
@click.argument("message_id")
@click.option("--from", "sender", required=True, help="The replying agent.")
@click.option("--to", "to", multiple=True, help="Recipients (default: the original sender).")
@click.option("--body", default=None, help="The Markdown body (or use --body-file / standard input).")
@click.option("--body-file", default=None, help="Read the body from this file ('-' for standard input).")
@click.option("--attach", "attach", multiple=True, help="Attach a file (repeatable), as for `gitmail send`.")
def reply(ctx: Context, project: str, message_id: str, sender: str, to: tuple[str, ...], body: str | None,
          body_file: str | None, attach: tuple[str, ...]) -> tuple[object, str]:
    """Reply to MESSAGE_ID in its thread."""
    from gitmail.mail.facade import SendOptions

    result = ctx.mail.reply_message(project, message_id, sender, body_text(body, body_file),
                                    SendOptions(attachment_paths=list(attach) or None), to=list(to) or None)
    sent = result.message
    assert sent is not None  # a reply from here is never held (hold_if_blocked is not offered)
    return result, f"sent {sent.id} (thread {sent.thread_id})"


@command(name="ack")
@click.argument("project")
@click.argument("agent")
@click.argument("message_id")
def ack(ctx: Context, project: str, agent: str, message_id: str) -> tuple[object, str]:
    """Acknowledge MESSAGE_ID as AGENT (also marks it read)."""
    result = ctx.mail.acknowledge_message(project, agent, message_id)
    return result, f"acknowledged {message_id} at {result.acknowledged_at}"


@command(name="search")
@click.argument("project")
@click.argument("query")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200), help="At most this many.")
@click.option("--exhaustive", is_flag=True, help="Rank every match, not only the newest 1,000.")
def search(ctx: Context, project: str, query: str, limit: int, exhaustive: bool) -> tuple[object, str]:
    """Full-text search of PROJECT's messages ("phrases", prefix*, AND/OR/NOT, field:value)."""
    hits = ctx.mail.search_messages(project, query, limit=limit, exhaustive=exhaustive)
    return hits, table(hits, [("id", "ID"), ("created_ts", "DATE"), ("from", "FROM"), ("subject", "SUBJECT")],
                       "no matches")


@command(name="thread")
@click.argument("project")
@click.argument("thread_id")
def thread(ctx: Context, project: str, thread_id: str) -> tuple[object, str]:
    """Show every message of a thread, oldest first."""
    page = ctx.mail.get_thread(project, thread_id, include_bodies=True)
    messages = list(page.messages)
    while page.has_more and page.next_after:  # the library reads a thread a page (a byte budget) at a time
        page = ctx.mail.get_thread(project, thread_id, include_bodies=True, after=page.next_after)
        messages += page.messages
    whole = dataclasses.replace(page, count=len(messages), messages=messages, has_more=False, next_after=None)
    text = f"\n\n{'-' * 72}\n\n".join(render_message(m) for m in messages)
    return whole, text or "no messages in this thread"


@command(name="log")
@click.argument("project")
@click.argument("ident")
@click.option("--thread", "as_thread", is_flag=True, help="Treat IDENT as a thread ID even if it names a message.")
@click.option("-p", "--patch", is_flag=True, help="Show each commit's diff (text output).")
def log(ctx: Context, project: str, ident: str, as_thread: bool, patch: bool) -> tuple[object, str]:
    """The git history of a message (IDENT is its ID) or of a whole thread.

    Runs the real `git log` on the archive over every file of the message(s):
    the message, its inbox and outbox copies and its receipts.
    """
    from gitmail.model.ids import is_id

    if as_thread or not is_id(ident):
        ids = [m.id for m in ctx.mail.get_thread(project, ident, include_bodies=False).messages]
    else:
        ids = [ident]
    git_dir = ctx.store.paths(ctx.store.resolve(project)).archive
    specs = [f":(glob)**/{message_id}.*" for message_id in ids]
    commits = []
    if specs:
        out = _git(git_dir, "log", "--format=%H%x1f%an%x1f%aI%x1f%s", "--", *specs)
        for line in out.splitlines():
            sha, author, date, subject = line.split("\x1f", 3)
            commits.append({"commit": sha, "author": author, "date": date, "subject": subject})
    text = "\n".join(f"{c['commit'][:12]} {c['date']} {c['author']}: {c['subject']}" for c in commits)
    if patch and specs:
        text = _git(git_dir, "log", "-p", "--", *specs)
    return {"ids": ids, "commits": commits}, text or "no history"


def _git(git_dir: str, *args: str) -> str:
    import subprocess

    proc = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GitmailError(INVALID_ARGUMENT, f"git {args[0]} failed on {git_dir}: {proc.stderr.strip()}",
                           {"git_dir": git_dir})
    return proc.stdout
