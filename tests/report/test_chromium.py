"""The demo's report rendered by headless Chromium: a real PNG that is not blank, and a DOM holding every value.

Skipped with a message when Chromium is absent, unless ``DPKIT_TEST_REQUIRE`` contains ``chromium`` (CI), in
which case it fails. Install it with ``apt-get install -y chromium``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tests.cli.fakes import FakeEngine

from dpkit.cli import main
from dpkit.report import fmt_interval, fmt_number

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = "chromium" in os.environ.get("DPKIT_TEST_REQUIRE", "")


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    exe = _find_chromium()
    if exe is None:
        if REQUIRED:
            pytest.fail("Chromium is required (DPKIT_TEST_REQUIRE contains 'chromium') but is not installed")
        pytest.skip("Chromium is not installed (apt-get install -y chromium); "
                    "set DPKIT_TEST_REQUIRE=chromium to make this a failure")
    return exe


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``examples/adult.toml`` released with a seed (the real tables engine when it imports)."""
    out = tmp_path_factory.mktemp("demo")
    try:
        import dpkit.tables  # noqa: F401

        engine = None
    except ImportError:  # pragma: no cover - the tables extra is not installed
        engine = FakeEngine()
    err = io.StringIO()
    code = main(["release", str(ROOT / "examples" / "adult.toml"), "--out", str(out), "--yes", "--seed", "11"],
                engine=engine, stdout=io.StringIO(), stderr=err)
    assert code == 0, err.getvalue()
    return out


def _run(chromium: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
           "--disable-extensions", f"--user-data-dir={tmp / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, timeout=180, check=False)


def _png_pixels(data: bytes) -> tuple[int, int, int, bytes]:
    """Decode a non-interlaced 8-bit RGB/RGBA PNG: (width, height, channels, raw pixel bytes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], "bad CRC"
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + n
    assert hdr is not None
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, hdr
    ch = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * ch
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return w, h, ch, bytes(out)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def test_screenshot_is_a_png_and_not_blank(chromium: str, demo: Path, tmp_path: Path) -> None:
    png = tmp_path / "shot.png"
    r = _run(chromium, tmp_path, "--window-size=1000,1800", f"--screenshot={png}", (demo / "report.html").as_uri())
    assert png.exists(), r.stderr.decode(errors="replace")[-2000:]
    w, h, ch, px = _png_pixels(png.read_bytes())
    assert (w, h) == (1000, 1800)
    pixels = [px[i:i + 3] for i in range(0, len(px), ch * 7)]  # every 7th pixel
    dark = sum(1 for p in pixels if sum(p) < 3 * 200)
    colours = len(set(pixels))
    assert dark / len(pixels) > 0.01, "the page looks blank"
    assert colours > 20, "the page has almost no colours: nothing rendered"
    # the bars are drawn in the chart colour (#4c8bd6) somewhere on the first screen
    assert any(abs(p[0] - 0x4C) < 12 and abs(p[1] - 0x8B) < 12 and abs(p[2] - 0xD6) < 12 for p in pixels)


def test_dom_holds_every_value_and_interval(chromium: str, demo: Path, tmp_path: Path) -> None:
    r = _run(chromium, tmp_path, "--dump-dom", (demo / "report.html").as_uri())
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    parser = _Text()
    parser.feed(r.stdout.decode("utf-8"))
    text = "\n".join(parser.parts)
    rows = json.loads((demo / "results.json").read_text())["rows"]
    assert len(rows) > 30
    for row in rows:
        assert fmt_number(row["value"]) in text, row
        if row["lo"] is not None and row["hi"] is not None:
            assert fmt_interval(row["lo"], row["hi"]) in text, row
        assert row["mechanism"] in text
    assert "INSECURE" in text and "What does this mean?" in text
