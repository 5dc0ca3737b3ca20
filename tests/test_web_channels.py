"""Channels in the web view: the list of channels and a channel's page, its posts sanitized like messages."""

from __future__ import annotations

import re

import httpx2 as httpx

from gitmail import Mail

from .inprocess_server import InProcessServer

PROJECT = "/work/web-channels/project"


def test_the_overseer_reads_channels_newest_first_with_bodies_sanitized(store):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    mail.register_agent(PROJECT, "p", "m", name="BlueLake")
    mail.create_channel(PROJECT, "BlueLake", "deploys", purpose="what ships")
    mail.create_channel(PROJECT, "BlueLake", "reviews")
    for i in range(29):
        mail.post_channel(PROJECT, "BlueLake", "deploys", f"release **{i}**")
    mail.post_channel(PROJECT, "BlueLake", "deploys",
                      "<script>alert(1)</script> [click](javascript:alert(2)) <img src=x onerror=alert(3)>")
    slug = store.resolve(PROJECT)
    with InProcessServer(store) as server, httpx.Client(base_url=server.base, timeout=60) as tab:
        listing = tab.get(f"/ui/p/{slug}/channels")
        first = tab.get(f"/ui/p/{slug}/channels/deploys")
        second = tab.get(f"/ui/p/{slug}/channels/deploys?page=2")
        missing = tab.get(f"/ui/p/{slug}/channels/nowhere")
        malformed = tab.get(f"/ui/p/{slug}/channels/No%20Spaces")
    assert listing.status_code == 200
    assert ">#deploys<" in listing.text and "what ships" in listing.text and ">#reviews<" in listing.text
    assert first.status_code == 200
    shown = re.findall(r'id="seq-(\d+)"', first.text)
    assert shown == [str(n) for n in range(30, 5, -1)]  # the newest 25, newest first
    assert re.findall(r'id="seq-(\d+)"', second.text) == ["5", "4", "3", "2", "1"]
    assert "<strong>28</strong>" in first.text  # Markdown rendered
    assert "<script>alert" not in first.text and 'href="javascript' not in first.text  # shown as text, never run
    assert "&lt;script&gt;alert(1)" in first.text and "<img src=x" not in first.text
    assert missing.status_code == 404 and malformed.status_code == 400
