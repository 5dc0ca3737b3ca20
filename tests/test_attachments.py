"""Attachments and images: WebP conversion, content addressing, inlining policy, allowed roots, hash checks."""

from __future__ import annotations

import base64
import hashlib
import io

import pytest
from PIL import Image

from gitmail import Change
from gitmail.mail import attachments as at
from gitmail.model.errors import GitmailError

from .coord_helpers import make_project

KEY = "/work/demo"


def png(width=32, height=32, color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def noisy_png(size=400) -> bytes:
    import random
    rnd = random.Random(7)
    image = Image.new("RGB", (size, size))
    image.putdata([(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(size * size)])
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def stored(data: bytes, ext: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return f"attachments/{digest[:2]}/{digest}.{ext}"


SHOT, README = stored(png(), "png"), stored(b"hello\n", "txt")


@pytest.fixture
def snap(store):
    """An archive holding a PNG and a text file as stored attachments (as an earlier message left them)."""
    make_project(store, KEY, "Blue")
    archive = store.archive(KEY)
    archive.transact(lambda s: Change("add a screenshot").put(SHOT, png()).put(README, b"hello\n"))
    return archive.snapshot()


@pytest.fixture
def settings(tmp_path):
    root = tmp_path / "allowed"
    root.mkdir()
    return at.Settings(roots=[str(root)], inline_max_bytes=4096, max_file_bytes=2 * 1024 * 1024)


def test_attachment_paths_are_converted_to_webp_and_content_addressed(snap, settings):
    out = at.prepare(snap, "See attached.", [SHOT, README], settings=settings)
    assert out.body == "See attached."
    image, text = out.attachments
    assert image["media_type"] == "image/webp" and image["type"] == "file" and image["name"] == SHOT.rsplit("/", 1)[1]
    data = out.files[image["path"]]
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    digest = hashlib.sha256(data).hexdigest()
    assert image["sha256"] == digest and image["size"] == len(data)
    assert image["path"] == f"attachments/{digest[:2]}/{digest[2:4]}/{digest}.webp"
    assert (image["width"], image["height"]) == (32, 32)
    # Other files are stored as they are.
    assert text["media_type"] == "text/plain" and out.files[text["path"]] == b"hello\n"
    assert text["path"].endswith(".txt")


def test_small_body_images_are_inlined_and_large_ones_stored(snap, settings, tmp_path):
    big = tmp_path / "allowed" / "big.png"
    big.write_bytes(noisy_png(300))
    body = f"Small: ![s]({SHOT})\nBig: ![b](" + str(big) + ' "title")\nWeb: ![w](https://example.org/x.png)'
    out = at.prepare(snap, body, settings=settings)
    small, large = out.attachments
    assert small["type"] == "inline" and large["type"] == "file"
    assert "![s](data:image/webp;base64," in out.body
    assert f"![b]({large['path']} \"title\")" in out.body
    assert "![w](https://example.org/x.png)" in out.body
    inline_data = out.body.split("data:image/webp;base64,")[1].split(")")[0]
    assert base64.b64decode(inline_data) == out.files[small["path"]]
    # Policy 'file' never inlines, 'inline' always does.
    assert "data:" not in at.prepare(snap, body, policy="file", settings=settings).body
    assert at.prepare(snap, body, policy="inline", settings=settings).body.count("data:image/webp") == 2


def test_data_uri_images_and_agent_policy(snap, settings):
    uri = "data:image/png;base64," + base64.b64encode(png(8, 8)).decode()
    out = at.prepare(snap, f"![dot]({uri})", settings=settings)
    assert out.attachments[0]["media_type"] == "image/webp" and "data:image/webp;base64," in out.body
    # convert_images=False stores the PNG as it is and inlines nothing ...
    raw = at.prepare(snap, f"![a]({SHOT})", convert_images=False, settings=settings)
    assert raw.attachments[0]["media_type"] == "image/png" and raw.body.startswith("![a](attachments/")
    # ... unless the sender's own policy is inline or file, which always converts.
    forced = at.prepare(snap, f"![a]({SHOT})", convert_images=False, agent_policy="file", settings=settings)
    assert forced.attachments[0]["media_type"] == "image/webp"


def test_same_content_is_stored_once_and_originals_optionally_kept(snap, settings):
    out = at.prepare(snap, f"![a]({SHOT}) ![b]({SHOT})", [SHOT], settings=settings)
    assert len(out.attachments) == 1 and out.attachments[0]["type"] == "inline"
    settings.keep_originals = True
    kept = at.prepare(snap, "x", [SHOT], settings=settings)
    entry = kept.attachments[0]
    assert kept.files[entry["original_path"]] == png()
    assert entry["original_path"].startswith("attachments/originals/") and entry["original_path"].endswith(".png")


@pytest.mark.parametrize("refs, body, code", [
    (["/etc/passwd"], "x", "PATH_NOT_ALLOWED"),
    (["../outside.png"], "x", "PATH_NOT_ALLOWED"),
    (["missing.png"], "x", "PATH_NOT_ALLOWED"),
    ([stored(b"never stored", "txt")], "x", "NOT_FOUND"),
    ([], "![x](/etc/hosts)", "PATH_NOT_ALLOWED"),
    ([], "![x](data:image/png,notbase64)", "INVALID_ARGUMENT"),
    ([], "![x](data:image/png;base64,@@@)", "INVALID_ARGUMENT"),
    ([], "![x](data:image/png;base64," + base64.b64encode(b"not an image").decode() + ")", "ATTACHMENT_UNDECODABLE"),
    (SHOT, "x", "INVALID_ARGUMENT"),
])
def test_bad_references_get_clear_errors(snap, settings, refs, body, code):
    with pytest.raises(GitmailError) as info:
        at.prepare(snap, body, refs, settings=settings)
    assert info.value.code == code and info.value.message


def test_oversize_and_undecodable_files_in_allowed_roots(snap, settings, tmp_path):
    root = tmp_path / "allowed"
    (root / "huge.bin").write_bytes(b"\0" * (settings.max_file_bytes + 1))
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    (root / "ok.png").write_bytes(png())
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(png())
    (root / "link.png").symlink_to(outside)
    for name, code in [("huge.bin", "ATTACHMENT_TOO_LARGE"), ("broken.png", "ATTACHMENT_UNDECODABLE"),
                       ("link.png", "PATH_NOT_ALLOWED")]:
        with pytest.raises(GitmailError) as info:
            at.prepare(snap, "x", [str(root / name)], settings=settings)
        assert info.value.code == code, name
    assert at.prepare(snap, "x", [str(root / "ok.png")], settings=settings).attachments[0]["media_type"] == "image/webp"
    settings.max_pixels = 100
    with pytest.raises(GitmailError) as info:
        at.prepare(snap, "x", [str(root / "ok.png")], settings=settings)
    assert info.value.code == "ATTACHMENT_TOO_LARGE"


def test_reading_verifies_the_hash(store, snap, settings):
    out = at.prepare(snap, "x", [SHOT], settings=settings)
    entry = out.attachments[0]
    archive = store.archive(KEY)
    archive.transact(lambda s: Change("store").put(entry["path"], out.files[entry["path"]]))
    fresh = archive.snapshot()
    assert at.read_attachment(fresh, entry["path"], entry["sha256"]) == out.files[entry["path"]]
    fetched = at.fetch(fresh, entry["path"])
    assert fetched["sha256"] == entry["sha256"] and fetched["media_type"] == "image/webp"
    archive.transact(lambda s: Change("tamper").put(entry["path"], b"tampered"))
    with pytest.raises(GitmailError) as info:
        at.verify_entries(archive.snapshot(), [entry])
    assert info.value.code == "CORRUPT_RECORD"
    for bad in ("attachments/../x", "project.yaml"):
        with pytest.raises(GitmailError) as info:
            at.read_attachment(fresh, bad)
        assert info.value.code == "INVALID_ARGUMENT"
