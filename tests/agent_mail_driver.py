"""Drives a real mcp_agent_mail 0.1.0 server over MCP, as agents would, and prints what it did as JSON.

Run by the interpreter of that server's virtual environment (fastmcp 2.x,
see :mod:`tests.agent_mail`), never by gitmail's own: it imports nothing of
gitmail. ``python agent_mail_driver.py URL WORKDIR`` writes a store with two
projects, four agents, messages with cc, bcc, replies, an explicit thread,
a file attachment and an inline image, read and acknowledgement receipts, a
contact link, and reservations (one released), then prints the ids the
server gave each (one JSON document on stdout).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import warnings

warnings.simplefilter("ignore")  # the old client's deprecation notices are not ours to fix

from fastmcp import Client  # noqa: E402 - after the warning filter
from PIL import Image  # noqa: E402

SHOP, INFRA = "/data/projects/shop", "/data/projects/infra"


async def call(client: Client, tool: str, **arguments: object) -> object:
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    data = result.structured_content if result.structured_content is not None else result.data
    return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data


async def extended(client: Client, tool: str, **arguments: object) -> object:
    return await call(client, "call_extended_tool", tool_name=tool, arguments=arguments)


def image(path: str, size: int, colour: tuple[int, int, int]) -> str:
    Image.new("RGB", (size, size), colour).save(path)
    return path


async def scenario(client: Client, workdir: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for key in (SHOP, INFRA):
        await call(client, "ensure_project", human_key=key)
    # BlueLake stores images as files (its policy), the others inline small ones.
    await call(client, "register_agent", project_key=SHOP, program="claude-code", model="opus", name="BlueLake",
               task_description="schema migration", attachments_policy="file")
    for name in ("GreenCastle", "RedStone"):
        await call(client, "register_agent", project_key=SHOP, program="codex-cli", model="gpt-5", name=name,
                   task_description=f"{name} work")
    for name in ("OrangeFox", "SilverPeak"):
        await call(client, "register_agent", project_key=INFRA, program="gemini-cli", model="pro", name=name)
    shot = image(os.path.join(workdir, "plan.png"), 64, (200, 30, 30))
    plan = await call(client, "send_message", project_key=SHOP, sender_name="BlueLake", to=["GreenCastle"],
                      cc=["RedStone"], subject="Plan for the schema",
                      body_md="We move to **v3** of the schema: migrations first, then the readers.",
                      importance="high", ack_required=True, attachment_paths=[shot])
    out["plan"] = plan["deliveries"][0]["payload"]["id"]
    secret = await call(client, "send_message", project_key=SHOP, sender_name="BlueLake", to=["GreenCastle"],
                        bcc=["RedStone"], subject="Budget", body_md="The budget for the quarter is tight.")
    out["secret"] = secret["deliveries"][0]["payload"]["id"]
    reply = await call(client, "reply_message", project_key=SHOP, message_id=out["plan"], sender_name="GreenCastle",
                       body_md="Agreed; I take the readers.")
    out["reply"] = reply["id"] if "id" in reply else reply["deliveries"][0]["payload"]["id"]
    inline = image(os.path.join(workdir, "dot.png"), 8, (10, 200, 10))
    ticket = await call(client, "send_message", project_key=SHOP, sender_name="RedStone", to=["BlueLake"],
                        subject="Ticket seven", body_md=f"Status of the flaky test ![dot]({inline})",
                        thread_id="TKT-7")
    out["ticket"] = ticket["deliveries"][0]["payload"]["id"]
    infra = await call(client, "send_message", project_key=INFRA, sender_name="OrangeFox", to=["SilverPeak"],
                       subject="Rotate the keys", body_md="The signing keys expire on Friday.")
    out["infra"] = infra["deliveries"][0]["payload"]["id"]
    await call(client, "mark_message_read", project_key=SHOP, agent_name="RedStone", message_id=out["plan"])
    await extended(client, "acknowledge_message", project_key=SHOP, agent_name="GreenCastle", message_id=out["plan"])
    await extended(client, "request_contact", project_key=SHOP, from_agent="RedStone", to_agent="BlueLake",
                   reason="reviews")
    await extended(client, "respond_contact", project_key=SHOP, to_agent="BlueLake", from_agent="RedStone", accept=True)
    held = await extended(client, "file_reservation_paths", project_key=SHOP, agent_name="GreenCastle",
                          paths=["src/readers/*.py"], ttl_seconds=7 * 24 * 3600, reason="readers")
    out["active_reservation"] = held["granted"][0]["id"]
    done = await extended(client, "file_reservation_paths", project_key=SHOP, agent_name="BlueLake",
                          paths=["migrations/**"], ttl_seconds=3600, reason="schema")
    out["released_reservation"] = done["granted"][0]["id"]
    await extended(client, "release_file_reservations", project_key=SHOP, agent_name="BlueLake",
                   file_reservation_ids=[out["released_reservation"]])
    return out


async def main(url: str, workdir: str) -> None:
    deadline = time.monotonic() + 120  # the server may still be starting (it imports a lot)
    while True:
        try:
            async with Client(url, timeout=60) as client:
                await call(client, "health_check")
            break
        except Exception as exc:  # noqa: BLE001 - whatever the transport says while nobody listens yet
            if time.monotonic() > deadline:
                raise SystemExit(f"the mcp_agent_mail server at {url} never answered: {exc!r}") from None
            await asyncio.sleep(0.2)
    async with Client(url, timeout=60) as client:
        print(json.dumps(await scenario(client, workdir)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
