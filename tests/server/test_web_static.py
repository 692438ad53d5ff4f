"""The web page's static files: served at ``/`` and ``/web/...`` with the right types, every module the page
imports exists, nothing outside the folder is reachable, and the package ships every file (no browser needed;
``tests/browser`` drives the page itself)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxserve.server import http_web

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    http_web.install(app)
    return TestClient(app)


def test_index_and_static_files(client: TestClient) -> None:
    index = client.get("/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert index.headers["cache-control"] == "no-cache"
    assert 'type="module" src="web/app.js"' in index.text
    for path, kind in [("/web/app.js", "javascript"), ("/web/styles.css", "text/css"),
                       ("/web/worklets/capture-processor.js", "javascript")]:
        r = client.get(path)
        assert r.status_code == 200 and kind in r.headers["content-type"], path
        assert r.headers["cache-control"] == "no-cache"
    assert client.get("/web/missing.js").status_code == 404
    assert client.get("/web/../http_web.py").status_code == 404
    assert client.get("/web/%2e%2e/http_web.py").status_code == 404


def test_every_module_and_worklet_the_page_loads_exists(client: TestClient) -> None:
    web = http_web.WEB_DIR
    for script in web.rglob("*.js"):
        text = script.read_text()
        for target in re.findall(r'^import .*? from "(\.{1,2}/[^"]+)";', text, re.M):
            assert (script.parent / target).resolve().is_file(), f"{script.name} imports missing {target}"
        for target in re.findall(r'new URL\("(\.{1,2}/[^"]+)", import\.meta\.url\)', text):
            url = "/web/" + (script.parent / target).resolve().relative_to(web).as_posix()
            assert client.get(url).status_code == 200, f"{script.name} loads missing {target}"
    ids = set(re.findall(r'id="([^"]+)"', (web / "index.html").read_text()))
    for script in web.rglob("*.js"):
        for wanted in re.findall(r'\$\("([a-z0-9-]+)"\)', script.read_text()):
            assert wanted in ids, f"{script.name} looks up #{wanted}, which index.html lacks"


def test_the_package_ships_every_web_file() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["voxserve"]
    package = ROOT / "voxserve"
    for path in http_web.WEB_DIR.rglob("*"):
        if path.is_file():
            rel = path.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(rel, p) and rel.count("/") == p.count("/") for p in patterns), rel
