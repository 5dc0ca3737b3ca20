"""The overdue-acknowledgement scan as a tool: what is overdue in a project, escalated as the server is set to.

The rules are in :mod:`gitmail.mail.overdue`; the server's settings
(``GITMAIL_ACK_*``, :mod:`gitmail.mail.acksettings`) decide the TTL and the
escalation, and ``gitmail serve`` also runs the same scan on an interval.
"""

from __future__ import annotations

from typing import Any

from .params import AgentToken, ProjectKey, ProverName
from .registry import MEMBER, Toolbox
from .results import IDEMPOTENT
from .runtime import Runtime

tools = Toolbox("coordination")


@tools.tool(IDEMPOTENT, access=MEMBER)
def scan_overdue_acks(
    rt: Runtime,
    project_key: ProjectKey,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """List the project's overdue acknowledgements, and escalate new ones as the server is configured to.

    A recipient's acknowledgement is overdue once a message that asked for
    it is older than the server's TTL (GITMAIL_ACK_TTL_SECONDS) without it.
    With escalation on, each one is escalated once, whoever scans and on
    whichever machine: 'log' records it, 'claim' also files a reservation
    for the operations agent and sends it a notice. Returns {ttl_seconds,
    escalation, overdue: [{message_id, agent, sender, subject, due_ts,
    escalated}], escalated: [...written by this call], holder_missing}.
    Needs proof of an agent of the project.
    """
    return rt.mail.scan_overdue_acks(project_key)
