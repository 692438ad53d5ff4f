"""The web page in a real headless browser: Debian's Chromium (``/usr/bin/chromium``, or ``$VOXSERVE_CHROMIUM``)
driven by Playwright for Python, against a real voxserve server with an API key. Chromium's fake microphone
plays a corpus clip (``--use-file-for-fake-audio-capture``); nothing reaches the network.

Skipped when Chromium or Playwright is missing (``pip install -e ".[web]"`` and ``apt-get install chromium``).
Screenshots go to ``artifacts/browser/`` (or ``$VOXSERVE_ARTIFACTS/browser``).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.server.conftest import LiveServer

CHROMIUM = Path(os.environ.get("VOXSERVE_CHROMIUM", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("VOXSERVE_ARTIFACTS", ROOT / "artifacts")) / "browser"
API_KEY = "browser-test-key"
# Chromium on a closed network: no background connections, no GPU, no sandbox (CI runs as root).
NO_NETWORK_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip every browser test, with the reason, when the browser or its driver is missing."""
    reason = None
    if not CHROMIUM.exists():
        reason = f"needs Chromium at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "needs Playwright for Python (pip install -e '.[web]')"
    if reason:
        here = Path(__file__).parent
        for item in items:
            if here in Path(str(item.fspath)).parents:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember each phase's report on the item, so a fixture can screenshot a failed test's page."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def _wav(audio: np.ndarray, rate: int) -> bytes:
    from voxserve.audio.encode import encode_audio

    return encode_audio(audio, rate, "wav")


@pytest.fixture(scope="session")
def mic_wav(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """The fake microphone's file: 1 s of silence, JFK, 4 s of silence, 48 kHz 16-bit WAV."""
    from voxserve.audio import decode_audio

    rate = 48000
    speech = decode_audio(data_dir / "fw_jfk.flac", sample_rate=rate)
    audio = np.concatenate([np.zeros(rate, np.float32), speech, np.zeros(4 * rate, np.float32)])
    path = tmp_path_factory.mktemp("mic") / "jfk_mic.wav"
    path.write_bytes(_wav(audio, rate))
    return path


@pytest.fixture(scope="session")
def two_voices_wav(data_dir: Path) -> bytes:
    """JFK, 1 s of silence, then a LibriSpeech reader: two clearly different voices (16 kHz WAV)."""
    from voxserve.audio import decode_audio

    gap = np.zeros(16000, np.float32)
    audio = np.concatenate([decode_audio(data_dir / "fw_jfk.flac"), gap, decode_audio(data_dir / "mfa_ls_61-70968-0000.flac")])
    return _wav(audio, 16000)


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server for all browser tests, with an API key (so the page's key handling is exercised)."""
    server = LiveServer(tmp_path_factory.mktemp("web-server"), api_keys=[API_KEY], job_workers=1)
    with server:
        server.auth = {"Authorization": f"Bearer {API_KEY}"}  # type: ignore[attr-defined]
        yield server


@pytest.fixture(scope="module")
def browser(mic_wav: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Debian Chromium with a fake microphone that speaks ``mic_wav`` once per capture.

    Module-scoped: Playwright's sync API keeps an event loop running in the main thread while it is open,
    which would break every later test that calls ``asyncio.run``.
    """
    from playwright.sync_api import sync_playwright

    args = [
        *NO_NETWORK_FLAGS,
        "--use-fake-ui-for-media-stream",  # grant the microphone without a prompt
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={mic_wav}%noloop",
    ]
    with sync_playwright() as p:
        # launch_persistent_context takes a fresh, empty profile folder (--user-data-dir) of our own.
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), headless=True,
            args=args, viewport={"width": 1280, "height": 900}, accept_downloads=True,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
