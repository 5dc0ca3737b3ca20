"""The overdue-acknowledgement scan as a tool: what is overdue in a project, escalated as the server is set to.

The rules are in :mod:`gitmail.mail.overdue`; the server's settings
(``GITMAIL_ACK_*``, :mod:`gitmail.mail.acksettings`) decide the TTL and the
escalation, and ``gitmail serve`` also runs the same scan on an interval.
"""

from __future__ import annotations

from gitmail.mail.facade import OverdueScan

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
) -> OverdueScan:
    """List overdue acknowledgements, and escalate new ones as the server is configured to."""
    return rt.mail.scan_overdue_acks(project_key)
