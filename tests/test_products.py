"""Products: links kept in each project's archive, product-wide reads that name each hit's project."""

from __future__ import annotations

import pytest

from gitmail import GitmailError
from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.clock import HLC
from gitmail.model.records import ProductLink, Relay, product_path, relay_path
from gitmail.storage.fsck import check_archive
from gitmail.sync.merge import merge_file

FRONT, BACK, INFRA = "/data/shop/frontend", "/data/shop/backend", "/data/shop/infra"


@pytest.fixture
def mail(store):
    mail = Mail(store)
    for key in (FRONT, BACK, INFRA):
        mail.ensure_project(key)
        mail.register_agent(key, "p", "m", name="Alice")
        mail.register_agent(key, "p", "m", name="Bob")
        mail.set_contact_policy(key, "Alice", "open")
    return mail


def test_a_product_comes_into_being_with_its_first_link_and_lives_in_each_projects_archive(mail, store):
    assert mail.ensure_product("Shop")["stored"] is False
    first = mail.products_link("Shop", FRONT, name="The shop")
    again = mail.products_link("shop", FRONT)
    mail.products_link("SHOP", BACK)
    view = mail.ensure_product("shop")
    assert first["changed"] is True and again["changed"] is False
    assert view["stored"] is True and view["name"] == "The shop"
    assert [p["human_key"] for p in view["projects"]] == [BACK, FRONT]
    for key in (FRONT, BACK):  # one record per linked project, in that project's own archive
        link = store.archive(key).snapshot().load(product_path("shop"), ProductLink)
        assert link is not None and link.name == "The shop" and link.unlinked_at is None
    assert store.archive(INFRA).snapshot().read(product_path("shop")) is None


def test_unlink_marks_the_link_and_relink_clears_the_mark(mail, store):
    mail.products_link("shop", FRONT)
    mail.products_link("shop", BACK)
    out = mail.products_unlink("shop", BACK)
    assert out["changed"] is True and [p["human_key"] for p in out["projects"]] == [FRONT]
    assert mail.products_unlink("shop", BACK)["changed"] is False
    assert store.archive(BACK).snapshot().load(product_path("shop"), ProductLink).unlinked_at is not None
    mail.products_link("shop", BACK)
    assert [p["human_key"] for p in mail.ensure_product("shop")["projects"]] == [BACK, FRONT]


def test_bad_input_is_refused_and_changes_nothing(mail, store):
    tip = store.archive(FRONT).tip()
    with pytest.raises(GitmailError) as bad_key:
        mail.products_link("no spaces", FRONT)
    with pytest.raises(GitmailError) as never:
        mail.products_unlink("shop", FRONT)
    with pytest.raises(GitmailError) as unknown:
        mail.products_link("shop", "/data/shop/nowhere")
    assert (bad_key.value.code, never.value.code, unknown.value.code) == ("INVALID_ARGUMENT", "NOT_FOUND",
                                                                          "NOT_FOUND")
    assert "products_link" in mail.ensure_product("shop")["note"]
    assert store.archive(FRONT).tip() == tip


def test_deleting_a_project_removes_its_link(mail):
    mail.products_link("shop", FRONT)
    mail.products_link("shop", INFRA)
    mail.hard_delete_project(INFRA, confirmation="I UNDERSTAND")
    assert [p["human_key"] for p in mail.ensure_product("shop")["projects"]] == [FRONT]


def test_product_search_and_inbox_span_the_projects_and_name_each_hit(mail, store):
    mail.products_link("shop", FRONT)
    mail.products_link("shop", BACK)
    for key in (FRONT, BACK, INFRA):
        mail.send_message(key, "Bob", ["Alice"], f"checkout flow in {key.rsplit('/', 1)[1]}", "the checkout")
    slugs = mail.product_projects("shop")
    hits = mail.search_product("shop", "checkout", projects=slugs)
    inbox = mail.fetch_inbox_product("shop", "Alice", projects=slugs)
    assert sorted(h["project"] for h in hits) == [BACK, FRONT]
    assert sorted(m["project"] for m in inbox) == [BACK, FRONT]
    assert all(m["subject"].endswith(m["project"].rsplit("/", 1)[1]) for m in inbox)
    only_front = mail.fetch_inbox_product("shop", "Alice", projects=[store.resolve(FRONT)])
    assert [m["project"] for m in only_front] == [FRONT]


def test_product_thread_summary_reads_the_thread_in_every_project(mail):
    mail.products_link("shop", FRONT)
    mail.products_link("shop", BACK)
    first = mail.send_message(FRONT, "Bob", ["Alice"], "release plan", "- [ ] tag the release")
    thread = first["deliveries"][0]["payload"]["thread_id"]
    mail.send_message(BACK, "Bob", ["Alice"], "release plan (api)", "TODO: bump the api",
                      options=SendOptions(thread_id="rel-1"))
    mail.send_message(FRONT, "Bob", ["Alice"], "release plan (web)", "TODO: bump the web",
                      options=SendOptions(thread_id="rel-1"))
    summary = mail.summarize_thread_product("shop", "rel-1", projects=mail.product_projects("shop"))
    assert summary["projects"] == [BACK, FRONT]
    assert summary["summary"]["message_count"] == 2
    assert {tuple(m["projects"]) for m in summary["messages"]} == {(BACK,), (FRONT,)}
    with pytest.raises(GitmailError) as missing:
        mail.summarize_thread_product("shop", thread, projects=[mail.store.resolve(BACK)])
    assert missing.value.code == "NOT_FOUND"


# -- the records in merges, at the doors and in fsck ----------------------------------------------

def _link(name: str, hlc: str, unlinked: str | None = None) -> bytes:
    return ProductLink(product="shop", name=name, linked_at="2026-12-01T10:00:00.000Z", hlc=HLC.parse(hlc),
                       unlinked_at=unlinked).to_bytes()


def test_a_rename_and_an_unlink_made_apart_both_survive_the_merge():
    path = product_path("shop")
    base = _link("Shop", "2026-12-01T10:00:00.000Z/0000/a")
    renamed = _link("Web shop", "2026-12-01T10:01:40.000Z/0000/a")
    unlinked = _link("Shop", "2026-12-01T10:03:20.000Z/0000/b", unlinked="2026-12-01T11:00:00.000Z")
    merged = [ProductLink.from_bytes(merge_file(path, base, x, y).content, path)
              for x, y in ((renamed, unlinked), (unlinked, renamed))]
    assert merged[0] == merged[1]
    assert merged[0].name == "Web shop" and merged[0].unlinked_at == "2026-12-01T11:00:00.000Z"


def _relay(hlc: str, delivered: str | None) -> bytes:
    return Relay(message_id="0a0a0a0a0a0a0a0a0a0a0a0", project="backend-0123456789ab",
                 created_ts="2026-12-01T10:00:00.000Z", hlc=HLC.parse(hlc), delivered_at=delivered).to_bytes()


def test_a_delivered_relay_stays_delivered_and_the_earliest_delivery_wins():
    path = relay_path("backend-0123456789ab", "0a0a0a0a0a0a0a0a0a0a0a0")
    base = _relay("2026-12-01T10:00:00.000Z/0000/a", None)
    late = _relay("2026-12-01T10:05:00.000Z/0000/a", "2026-12-01T10:05:00.000Z")
    early = _relay("2026-12-01T10:01:40.000Z/0000/b", "2026-12-01T10:01:00.000Z")
    for ours, theirs in ((late, early), (early, late)):
        merged = Relay.from_bytes(merge_file(path, base, ours, theirs).content, path)
        assert merged.delivered_at == "2026-12-01T10:01:00.000Z"
    assert merge_file(path, base, base, late).content == late


def test_the_record_checker_refuses_undoing_a_delivery(tmp_path):
    import pygit2

    from gitmail.storage.recordcheck import Checker

    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    path = relay_path("backend-0123456789ab", "0a0a0a0a0a0a0a0a0a0a0a0")

    def tree(data: bytes):
        index = pygit2.Index()
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
        return repo[index.write_tree(repo)]

    delivered = tree(_relay("2026-12-01T10:01:40.000Z/0000/a", "2026-12-01T10:01:00.000Z"))
    undone = tree(_relay("2026-12-01T10:03:20.000Z/0000/a", None))
    problems = Checker(repo, "hub").check_trees(delivered, undone)
    assert [p.path for p in problems] == [path] and "delivery is final" in problems[0].reason
    assert Checker(repo, "hub").check_trees(undone, delivered) == []


def test_fsck_knows_product_links(mail, store):
    mail.products_link("shop", FRONT)
    assert check_archive(store.archive(FRONT)) == []
