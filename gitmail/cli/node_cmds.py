"""Commands about signing keys: the nodes of a project (``gitmail nodes``), ``verify`` and ``adopt``."""

from __future__ import annotations

import click

from ._app import Context, cli, command


@cli.group(name="nodes")
def nodes_group() -> None:
    """The keys allowed to sign a project's commits: list, show, export, pin, add, rotate, revoke."""


def _line(view: object) -> str:
    from gitmail.storage.nodes import NodeView

    assert isinstance(view, NodeView)
    marks = [view.kind]
    if view.this_machine:
        marks.append("this machine")
    if view.revoked:
        marks.append("REVOKED")
    if view.pinned:
        marks.append("pinned" if view.pinned == "same" else "PINNED TO ANOTHER KEY")
    if view.rotated_at:
        marks.append(f"rotated {view.rotated_at}")
    return f"{view.node}  {view.fingerprint}  ({', '.join(marks)})"


@command(group=nodes_group, name="list")
@click.argument("project")
def nodes_list(ctx: Context, project: str) -> tuple[object, str]:
    """List PROJECT's nodes: name, key fingerprint, kind, and whether revoked or pinned here."""
    from gitmail.storage.nodes import list_nodes

    store = ctx.store
    views = list_nodes(store.archive(project), store.home, store.node)
    text = "\n".join(_line(v) for v in views)
    return views, text or "no nodes yet (a machine publishes its key with its first write)"


@command(group=nodes_group, name="show")
@click.argument("project")
@click.argument("node")
def nodes_show(ctx: Context, project: str, node: str) -> tuple[object, str]:
    """Show one node of PROJECT with its full public key (and the key it rotated from)."""
    from gitmail.storage.nodes import show_node

    store = ctx.store
    view = show_node(store.archive(project), store.home, store.node, node)
    text = _line(view) + f"\nkey: {view.key}"
    if view.previous_key:
        text += f"\nprevious key: {view.previous_key}"
    return view, text


@command(group=nodes_group, name="export")
@click.argument("project")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the file here (default: print it).")
def nodes_export(ctx: Context, project: str, output: str | None) -> tuple[object, str]:
    """Write git's allowed-signers file for PROJECT's keys not revoked.

    Use it with `git -c gpg.format=ssh -c gpg.ssh.allowedSignersFile=FILE
    verify-commit` or `git log --show-signature`.
    """
    from gitmail.storage.nodes import allowed_signers

    text = allowed_signers(ctx.store.archive(project))
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
        return {"path": output, "lines": text.count("\n")}, f"wrote {text.count(chr(10))} key(s) to {output}"
    return {"allowed_signers": text}, text.rstrip("\n")


@command(group=nodes_group, name="pin")
@click.argument("project")
@click.argument("node")
@click.option("--key", help="Pin this public key ('ssh-ed25519 AAAA...') instead of the one PROJECT names: on a "
              "hub's machine, before the node's record first arrives.")
def nodes_pin(ctx: Context, project: str, node: str, key: str | None) -> tuple[object, str]:
    """Remember NODE's current key on this machine; another key under its name is reported from then on."""
    from gitmail.storage.nodes import pin, pin_key

    store = ctx.store
    if key is not None:
        fingerprint = pin_key(store.home, node, key)
        return {"node": node, "fingerprint": fingerprint}, f"pinned {node} to {fingerprint}"
    view = pin(store.archive(project), store.home, node)
    return view, f"pinned {view.node} to {view.fingerprint}"


@command(group=nodes_group, name="add")
@click.argument("project")
@click.argument("name")
@click.option("--key", required=True, help="The public key, as OpenSSH writes it: 'ssh-ed25519 AAAA...'.")
@click.option("--human", is_flag=True, help="A person's own git signing key (for commits pushed by hand).")
def nodes_add(ctx: Context, project: str, name: str, key: str, human: bool) -> tuple[object, str]:
    """Register the key of a machine or person that does not publish its own (a new record in PROJECT)."""
    from gitmail.storage.nodes import add

    store = ctx.store
    record = add(store.archive(project), name=name, key=key, human=human, by=store.node, now=store.clock.now_ts())
    return record.to_fields(), f"registered {record.node} ({record.kind})"


@command(group=nodes_group, name="rotate")
def nodes_rotate(ctx: Context) -> tuple[object, str]:
    """Move this machine to a new key: each project's record names it, signed by the old key."""
    from gitmail.storage.nodes import rotate_store

    out = rotate_store(ctx.store)
    return out, f"{out.node} now signs with {out.key} ({len(out.projects)} project(s) updated)"


@command(group=nodes_group, name="revoke")
@click.argument("project")
@click.argument("node")
@click.option("--reason", default="", help="Why (a lost or stolen machine, a person who left).")
def nodes_revoke(ctx: Context, project: str, node: str, reason: str) -> tuple[object, str]:
    """Revoke NODE's current key in PROJECT: export leaves it out and verify reports its commits."""
    from gitmail.storage.nodes import revoke

    store = ctx.store
    record = revoke(store.archive(project), name=node, reason=reason, by=store.node, now=store.clock.now_ts())
    return record.to_fields(), f"revoked the key of {node} ({record.key_id[:16]}...)"


@command(group=nodes_group, name="handover")
@click.argument("project")
@click.argument("agent")
@click.argument("node")
def nodes_handover(ctx: Context, project: str, agent: str, node: str) -> tuple[object, str]:
    """Move AGENT to NODE: from then on only NODE's key may sign its records (run on the node it is bound to)."""
    from gitmail.storage.nodes import handover

    store = ctx.store
    moved = handover(store.archive(project), agent=agent, to=node, hlc=store.clock.tick())
    return moved.to_fields(), f"{moved.name} is now bound to node {node}"


@command(name="verify")
@click.argument("project")
def verify_cmd(ctx: Context, project: str) -> tuple[object, str, int]:
    """Check every commit of PROJECT's history: its signature, and whether its signer may write what it writes.

    An adoption (gitmail adopt) vouches for what it does at every door: in
    the adopted history, unsigned commits from before the project signed
    anything and what a revoked key signed before its revocation. Commits
    below the boundary of a shallow join are trusted by the pinned hub. Verdicts
    are remembered outside the archive, so a second run checks only new
    commits. Exit 0 clean, 1 findings, 2 could not run.
    """
    from gitmail.storage.verify import verify
    from gitmail.sync.findings import SYNC_RULES

    store = ctx.store
    slug = store.resolve(project)
    out = verify(store.archive(slug), slug, store.paths(slug).derived, rules=SYNC_RULES)
    lines = [("kept aside: " if f.kept_aside else "")
             + ("before its revocation (let in by every door; review, then adopt or repair): "
                if f.before_revocation else "")
             + (f"{f.commit[:12]} signed by a node not allowed to write it ({f.node}): {f.path}: {f.summary}"
                if f.path else f"{f.commit[:12]} {f.problem}{' (' + f.node + ')' if f.node else ''}: {f.summary}")
             for f in out.findings]
    lines.append(f"{out.commits} commit(s) judged ({out.checked} checked now), {len(out.findings)} finding(s)"
                 + (f"; history adopted up to {', '.join(c[:12] for c in out.adopted)}" if out.adopted else ""))
    if out.repaired:
        lines.append(f"mended by a repair (in the history, none of their records in effect): "
                     f"{', '.join(c[:12] for c in out.repaired)}")
    if out.trusted_by_pin:
        lines.append(f"joined shallow: boundary {', '.join(c[:12] for c in out.trusted_by_pin)} trusted by the pin "
                     f"of hub {out.pinned_hub} (history below it not held here; `gitmail deepen {project}` fetches it)")
    return out, "\n".join(lines), 0 if out.clean else 1


@command(name="adopt")
@click.argument("project")
@click.option("--commit", help="The last commit to trust as it is (default: the tip of main).")
def adopt_cmd(ctx: Context, project: str, commit: str | None) -> tuple[object, str]:
    """Trust PROJECT's history up to a commit as it is, as verify and every door judge it.

    The adoption vouches, in that history, for the unsigned commits with no
    signed commit below them (written before signing), and for what a
    revoked key signed before its revocation: to trust a lost machine's
    commits from before the theft, adopt the last commit made before it.
    Any other commit of that history is judged as ever.
    """
    from gitmail.storage.verify import adopt

    store = ctx.store
    record = adopt(store.archive(project), node=store.node, now=store.clock.now_ts(), commit=commit)
    return record.to_fields(), f"adopted the history up to {record.commit[:12]} (gitmail verify shows what it covers)"
