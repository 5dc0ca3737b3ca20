"""The committed store of a newer mcp_agent_mail release (0.3.x), and how it is made.

Releases after 0.1.0 added registration tokens, topics, retirement,
products, window identities and stored summaries. No release of that schema
is on PyPI, so the import's tests read a store built here to it: the tables
are the ones its models create (the DDL below is what SQLModel emits for the
models of release 0.3.2), the values are written the way that server writes
them (naive UTC times, tokens in clear, attachment metadata as JSON, message
files named ``<time>__<subject>__<id>.md`` in the archive folder).

``python -m tests.agent_mail_fixture`` rebuilds ``tests/agent_mail_v032/``
(the database ``storage.sqlite3`` and the archive folder ``archive/``); the
result is the same bytes every time. What the store holds, on purpose:

- two projects (frontend and backend) in one product, and a third with a
  human key gitmail does not accept;
- agents with tokens, one retired, one without a token, one named
  ``Overseer`` (a name gitmail keeps for the human);
- messages over three days with cc, bcc, a reply, a topic, an invalid topic,
  an attachment (its bytes in the archive), an attachment whose file is
  gone, a message whose file is gone, one sent across projects, and one
  from the agent gitmail cannot take;
- read and acknowledgement times, contact links (one across projects),
  reservations (active, released, expired), a window identity, a summary,
  and a table gitmail leaves out (sibling suggestions).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_mail_v032")
DATABASE = os.path.join(HERE, "storage.sqlite3")
ARCHIVE = os.path.join(HERE, "archive")

FRONT, BACK = "/data/team/frontend", "/data/team/backend"
TOKENS = {"Alice": "amt-alice-6f1d2c0a9b8e7d6c5b4a39281706f5e4", "Bob": "amt-bob-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
          "Dave": "amt-dave-99887766554433221100ffeeddccbbaa"}
ATTACHMENT = bytes(range(256)) * 4  # the stored bytes of the one readable attachment (any bytes do)
ATTACHMENT_SHA1 = hashlib.sha1(ATTACHMENT).hexdigest()

SCHEMA = """
CREATE TABLE projects (id INTEGER NOT NULL, slug VARCHAR(255) NOT NULL, human_key VARCHAR(255) NOT NULL,
    created_at DATETIME NOT NULL, archived_at DATETIME, PRIMARY KEY (id));
CREATE UNIQUE INDEX ix_projects_slug ON projects (slug);
CREATE TABLE products (id INTEGER NOT NULL, product_uid VARCHAR(64) NOT NULL, name VARCHAR(255) NOT NULL,
    created_at DATETIME NOT NULL, PRIMARY KEY (id), CONSTRAINT uq_product_uid UNIQUE (product_uid),
    CONSTRAINT uq_product_name UNIQUE (name));
CREATE TABLE product_project_links (id INTEGER NOT NULL, product_id INTEGER NOT NULL, project_id INTEGER NOT NULL,
    created_at DATETIME NOT NULL, PRIMARY KEY (id), CONSTRAINT uq_product_project UNIQUE (product_id, project_id),
    FOREIGN KEY(product_id) REFERENCES products (id), FOREIGN KEY(project_id) REFERENCES projects (id));
CREATE TABLE agents (id INTEGER NOT NULL, project_id INTEGER NOT NULL, name VARCHAR(128) NOT NULL,
    program VARCHAR(128) NOT NULL, model VARCHAR(128) NOT NULL, task_description VARCHAR(2048) NOT NULL,
    inception_ts DATETIME NOT NULL, last_active_ts DATETIME NOT NULL, attachments_policy VARCHAR(16) NOT NULL,
    contact_policy VARCHAR(16) NOT NULL, registration_token VARCHAR(64), retired_at DATETIME, PRIMARY KEY (id),
    CONSTRAINT uq_agent_project_name UNIQUE (project_id, name), FOREIGN KEY(project_id) REFERENCES projects (id));
CREATE INDEX ix_agents_registration_token ON agents (registration_token);
CREATE TABLE window_identities (id INTEGER NOT NULL, project_id INTEGER NOT NULL, window_uuid VARCHAR(64) NOT NULL,
    display_name VARCHAR(128) NOT NULL, created_ts DATETIME NOT NULL, last_active_ts DATETIME NOT NULL,
    expires_ts DATETIME, PRIMARY KEY (id), CONSTRAINT uq_window_identity_project_uuid UNIQUE (project_id, window_uuid),
    FOREIGN KEY(project_id) REFERENCES projects (id));
CREATE TABLE message_summaries (id INTEGER NOT NULL, project_id INTEGER NOT NULL, summary_text VARCHAR NOT NULL,
    start_ts DATETIME NOT NULL, end_ts DATETIME NOT NULL, source_message_count INTEGER NOT NULL,
    source_thread_ids VARCHAR NOT NULL, llm_model VARCHAR(128), cost_usd FLOAT, created_ts DATETIME NOT NULL,
    PRIMARY KEY (id), FOREIGN KEY(project_id) REFERENCES projects (id));
CREATE TABLE project_sibling_suggestions (id INTEGER NOT NULL, project_a_id INTEGER NOT NULL,
    project_b_id INTEGER NOT NULL, score FLOAT NOT NULL, status VARCHAR(16) NOT NULL, rationale VARCHAR(4096) NOT NULL,
    created_ts DATETIME NOT NULL, evaluated_ts DATETIME NOT NULL, confirmed_ts DATETIME, dismissed_ts DATETIME,
    PRIMARY KEY (id), CONSTRAINT uq_project_sibling_pair UNIQUE (project_a_id, project_b_id));
CREATE TABLE messages (id INTEGER NOT NULL, project_id INTEGER NOT NULL, sender_id INTEGER NOT NULL,
    thread_id VARCHAR(128), topic VARCHAR(64), subject VARCHAR(512) NOT NULL, body_md VARCHAR NOT NULL,
    importance VARCHAR(16) NOT NULL, ack_required BOOLEAN NOT NULL, created_ts DATETIME NOT NULL,
    attachments JSON DEFAULT '[]' NOT NULL, PRIMARY KEY (id), FOREIGN KEY(project_id) REFERENCES projects (id),
    FOREIGN KEY(sender_id) REFERENCES agents (id));
CREATE INDEX idx_messages_project_created ON messages (project_id, created_ts);
CREATE TABLE file_reservations (id INTEGER NOT NULL, project_id INTEGER NOT NULL, agent_id INTEGER NOT NULL,
    path_pattern VARCHAR(512) NOT NULL, "exclusive" BOOLEAN NOT NULL, reason VARCHAR(512) NOT NULL,
    created_ts DATETIME NOT NULL, expires_ts DATETIME NOT NULL, released_ts DATETIME, PRIMARY KEY (id),
    FOREIGN KEY(project_id) REFERENCES projects (id), FOREIGN KEY(agent_id) REFERENCES agents (id));
CREATE TABLE agent_links (id INTEGER NOT NULL, a_project_id INTEGER NOT NULL, a_agent_id INTEGER NOT NULL,
    b_project_id INTEGER NOT NULL, b_agent_id INTEGER NOT NULL, status VARCHAR(16) NOT NULL,
    reason VARCHAR(512) NOT NULL, created_ts DATETIME NOT NULL, updated_ts DATETIME NOT NULL, expires_ts DATETIME,
    PRIMARY KEY (id), CONSTRAINT uq_agentlink_pair UNIQUE (a_project_id, a_agent_id, b_project_id, b_agent_id));
CREATE TABLE message_recipients (message_id INTEGER NOT NULL, agent_id INTEGER NOT NULL, kind VARCHAR(8) NOT NULL,
    read_ts DATETIME, ack_ts DATETIME, PRIMARY KEY (message_id, agent_id),
    FOREIGN KEY(message_id) REFERENCES messages (id), FOREIGN KEY(agent_id) REFERENCES agents (id));
CREATE VIRTUAL TABLE fts_messages USING fts5(message_id UNINDEXED, subject, body);
"""

PROJECTS = [(1, "data-team-frontend", FRONT, "2026-01-05 08:00:00.000000"),
            (2, "data-team-backend", BACK, "2026-01-05 08:05:00.000000"),
            (3, "scratch", "scratch", "2026-01-05 08:10:00.000000")]
PRODUCTS = [(1, "a1b2c3d4e5f6a7b8c9d0", "Team Shop", "2026-01-05 08:20:00.000000")]
PRODUCT_LINKS = [(1, 1, 1, "2026-01-05 08:21:00.000000"), (2, 1, 2, "2026-01-05 08:22:00.000000")]
# id, project, name, program, model, task, inception, last active, attachments policy, contact policy, token, retired
AGENTS = [
    (1, 1, "Alice", "claude-code", "opus-4.1", "the checkout page", "2026-01-05 09:00:00.000000",
     "2026-01-07 17:30:00.000000", "auto", "auto", TOKENS["Alice"], None),
    (2, 1, "Bob", "codex-cli", "gpt-5", "payments", "2026-01-05 09:01:00.000000", "2026-01-06 12:00:00.000000",
     "auto", "contacts_only", TOKENS["Bob"], "2026-01-07 09:00:00.000000"),
    (3, 1, "Carol", "gemini-cli", "pro", "", "2026-01-05 09:02:00.000000", "2026-01-06 10:00:00.000000", "file",
     "open", None, None),
    (4, 1, "Overseer", "claude-code", "opus-4.1", "", "2026-01-05 09:03:00.000000", "2026-01-05 09:03:00.000000",
     "auto", "auto", None, None),
    (5, 2, "Dave", "claude-code", "sonnet", "the api", "2026-01-05 09:10:00.000000", "2026-01-06 16:00:00.000000",
     "auto", "auto", TOKENS["Dave"], None),
    (6, 2, "Erin", "codex-cli", "gpt-5", "", "2026-01-05 09:11:00.000000", "2026-01-05 09:11:00.000000", "auto",
     "auto", None, None),
    (7, 3, "Frank", "codex-cli", "gpt-5", "", "2026-01-05 09:12:00.000000", "2026-01-05 09:12:00.000000", "auto",
     "auto", None, None),
]
FILE_ATTACHMENT = {"type": "file", "media_type": "image/webp", "bytes": len(ATTACHMENT), "width": 16, "height": 16,
                   "sha1": ATTACHMENT_SHA1,
                   "path": f"projects/data-team-frontend/attachments/{ATTACHMENT_SHA1[:2]}/{ATTACHMENT_SHA1}.webp"}
GONE_ATTACHMENT = {"type": "file", "media_type": "image/webp", "bytes": 10, "sha1": "f" * 40,
                   "path": f"projects/data-team-frontend/attachments/ff/{'f' * 40}.webp"}
# id, project, sender, thread, topic, subject, body, importance, ack, created, attachments, recipients
# (recipients: agent, kind, read, ack)
MESSAGES = [
    (1, 1, 1, None, "release-1.2", "Release plan",
     f"Ship **1.2** on Thursday.\n\n![plan]({FILE_ATTACHMENT['path']})", "high", True,
     "2026-01-05 10:00:00.250000", [FILE_ATTACHMENT],
     [(2, "to", "2026-01-05 10:30:00.000000", "2026-01-05 10:31:00.000000"), (3, "cc", "2026-01-05 11:00:00.000000",
                                                                               None)]),
    (2, 1, 2, "1", "release-1.2", "Re: Release plan", "Payments are ready.", "high", False,
     "2026-01-05 12:00:00.000000", [], [(1, "to", "2026-01-05 12:10:00.000000", None)]),
    (3, 1, 3, None, None, "Budget", "Keep it under the line.", "normal", False, "2026-01-05 13:00:00.000000", [],
     [(1, "to", None, None), (2, "bcc", "2026-01-06 08:00:00.000000", None)]),
    (4, 1, 5, None, None, "API change", "The `/orders` endpoint moves to v2.", "urgent", True,
     "2026-01-06 09:00:00.000000", [], [(1, "to", "2026-01-06 09:05:00.000000", "2026-01-06 09:06:00.000000")]),
    (5, 1, 1, "TKT-7", "bad topic!", "Flaky test", "The checkout test fails one run in ten.", "normal", False,
     "2026-01-06 10:00:00.000000", [], [(3, "to", None, None)]),
    (6, 1, 4, None, None, "From the reserved name", "Nobody can keep this one.", "normal", False,
     "2026-01-06 11:00:00.000000", [], [(1, "to", None, None)]),
    (7, 1, 1, "TKT-7", None, "Screenshot", "The failing run.", "normal", False, "2026-01-06 12:00:00.000000",
     [GONE_ATTACHMENT], [(3, "to", None, None)]),
    (8, 2, 6, None, None, "Deploy window", "Tuesday 06:00 UTC.", "normal", False, "2026-01-07 08:00:00.000000", [],
     [(5, "to", "2026-01-07 08:01:00.000000", None)]),
    (9, 1, 3, "1", "release-1.2", "Re: Release plan", "Docs are done.", "normal", False,
     "2026-01-07 09:30:00.000000", [], [(1, "to", None, None), (2, "cc", None, None)]),
]
MISSING_FILE = 9  # the one message whose file is gone from the archive folder
# id, a project, a agent, b project, b agent, status, reason, created, updated, expires
LINKS = [(1, 1, 3, 1, 1, "approved", "reviews", "2026-01-05 12:30:00.000000", "2026-01-05 12:40:00.000000",
          "2026-02-04 12:40:00.000000"),
         (2, 2, 5, 1, 1, "approved", "the api", "2026-01-05 14:00:00.000000", "2026-01-05 14:05:00.000000", None),
         (3, 1, 2, 1, 3, "pending", "payments docs", "2026-01-06 09:30:00.000000", "2026-01-06 09:30:00.000000",
          None)]
# id, project, agent, pattern, exclusive, reason, created, expires, released
RESERVATIONS = [(1, 1, 1, "src/checkout/*.ts", True, "checkout", "2026-01-07 10:00:00.000000",
                 "2099-01-01 00:00:00.000000", None),
                (2, 1, 2, "src/payments/**", True, "payments", "2026-01-05 09:30:00.000000",
                 "2026-01-05 21:30:00.000000", "2026-01-05 15:00:00.000000"),
                (3, 1, 3, "docs/*.md", False, "docs", "2026-01-06 09:00:00.000000", "2026-01-06 10:00:00.000000",
                 None)]
WINDOWS = [(1, 1, "3f2b6c1e-8a4d-4b7e-9c1a-2d5e6f7a8b9c", "Alice", "2026-01-05 09:00:00.000000",
            "2026-01-07 17:30:00.000000", None)]
SUMMARIES = [(1, 1, "- Release 1.2 ships Thursday\n- Payments are ready\nTODO: update the docs",
              "2026-01-05 00:00:00.000000", "2026-01-06 00:00:00.000000", 3, json.dumps(["1", "3"]), "gpt-5-mini",
              0.0012, "2026-01-06 00:00:05.000000")]


def _file_name(created: str, subject: str, message_id: int) -> str:
    stamp = created[:19].replace(" ", "T").replace(":", "-") + "Z"
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", subject).strip("-_").lower()[:80] or "message"
    return f"{stamp}__{slug}__{message_id}.md"


def _archive() -> None:
    """The server's archive folder: message files (but one) and the readable attachment's bytes."""
    slugs = {project_id: slug for project_id, slug, _, _ in PROJECTS}
    for message_id, project_id, _, _, _, subject, body, _, _, created, _, _ in MESSAGES:
        if message_id == MISSING_FILE:
            continue
        folder = os.path.join(ARCHIVE, "projects", slugs[project_id], "messages", created[:4], created[5:7])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, _file_name(created, subject, message_id)), "w") as handle:
            handle.write(f"---json\n{json.dumps({'id': message_id, 'subject': subject})}\n---\n\n{body}\n")
    stored = os.path.join(ARCHIVE, FILE_ATTACHMENT["path"])
    os.makedirs(os.path.dirname(stored), exist_ok=True)
    with open(stored, "wb") as handle:
        handle.write(ATTACHMENT)
    os.makedirs(os.path.join(ARCHIVE, "projects", "data-team-backend", "messages"), exist_ok=True)


def build() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    os.makedirs(HERE)
    db = sqlite3.connect(DATABASE)
    db.executescript(SCHEMA)
    db.executemany("INSERT INTO projects VALUES (?, ?, ?, ?, NULL)", PROJECTS)
    db.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", PRODUCTS)
    db.executemany("INSERT INTO product_project_links VALUES (?, ?, ?, ?)", PRODUCT_LINKS)
    db.executemany("INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", AGENTS)
    for message_id, project, sender, thread, topic, subject, body, importance, ack, created, files, to in MESSAGES:
        db.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (message_id, project, sender, thread, topic, subject, body, importance, ack, created,
                    json.dumps(files)))
        db.execute("INSERT INTO fts_messages (rowid, message_id, subject, body) VALUES (?, ?, ?, ?)",
                   (message_id, message_id, subject, body))
        db.executemany("INSERT INTO message_recipients VALUES (?, ?, ?, ?, ?)",
                       [(message_id, *recipient) for recipient in to])
    db.executemany("INSERT INTO agent_links VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", LINKS)
    db.executemany("INSERT INTO file_reservations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", RESERVATIONS)
    db.executemany("INSERT INTO window_identities VALUES (?, ?, ?, ?, ?, ?, ?)", WINDOWS)
    db.executemany("INSERT INTO message_summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", SUMMARIES)
    db.execute("INSERT INTO project_sibling_suggestions VALUES (1, 1, 2, 0.9, 'suggested', 'same team', "
               "'2026-01-05 08:30:00.000000', '2026-01-05 08:30:00.000000', NULL, NULL)")
    db.commit()
    db.execute("VACUUM")
    db.close()
    _archive()


if __name__ == "__main__":
    build()
    print(f"wrote {DATABASE} and {ARCHIVE}")
