"""Pages on another origin (docs/server.md): `longldp serve --cors-origin ORIGIN` answers the
browser's preflight and marks its answers for that origin only; without the option the server
sends no CORS header at all. The browser's side is tested in chromium by
tests/test_js_client.py (a page on another origin uploads, a page on an unlisted one is
blocked)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from longldp.cli import app
from longldp.server import build_app, check_origins
from longldp.server.app import CORS_MAX_AGE
from server_helpers import ADMIN, bearer

SITE = "http://127.0.0.1:8080"
SPEC = {"name": "L-GRR", "params": {"k": 4, "eps_perm": 2.0, "eps_1": 1.0}}


@pytest.fixture
def client(tmp_path):
    with TestClient(build_app(f"sqlite:///{tmp_path / 'c.db'}", ADMIN, cors_origins=[SITE])) as c:
        r = c.post("/v1/collections", json={"name": "c", "protocol": SPEC, "auth": "shared"},
                   headers=bearer(ADMIN))  # fmt: skip
        assert r.status_code == 201, r.text
        yield c


def preflight(client, origin: str):
    return client.options(
        "/v1/collections/c/reports",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )


def test_preflight_of_an_allowed_origin(client):
    r = preflight(client, SITE)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == SITE
    allowed = {h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed
    assert "POST" in r.headers["access-control-allow-methods"]
    assert r.headers["access-control-max-age"] == str(CORS_MAX_AGE)
    assert "access-control-allow-credentials" not in r.headers  # bearer tokens, no cookies


def test_preflight_of_another_origin_is_refused(client):
    r = preflight(client, "http://127.0.0.1:9999")
    assert r.status_code == 400
    assert "access-control-allow-origin" not in r.headers


def test_answers_carry_the_origin_and_expose_retry_after(client):
    r = client.get("/v1/collections/c", headers={"Origin": SITE, **bearer(ADMIN)})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == SITE
    assert "retry-after" in r.headers["access-control-expose-headers"].lower()
    other = client.get("/v1/collections/c", headers={"Origin": "https://x.org", **bearer(ADMIN)})
    assert "access-control-allow-origin" not in other.headers


def test_no_cors_headers_by_default(tmp_path):
    with TestClient(build_app(f"sqlite:///{tmp_path / 'd.db'}", ADMIN)) as c:
        r = c.get("/healthz", headers={"Origin": SITE})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        assert c.options("/healthz", headers={"Origin": SITE}).status_code == 405


@pytest.mark.parametrize(
    "bad", ["https://x.org/", "https://x.org/app", "x.org", "ftp://x.org", "", "https://", 3]
)
def test_bad_origins_are_refused(bad):
    with pytest.raises(ValueError, match="'cors_origins' must be origins like"):
        check_origins("serve", [bad])


def test_origins_are_normalized():
    got = check_origins("serve", ["HTTPS://App.Example.org", "*", "http://[::1]:8080", "*"])
    assert got == ("https://app.example.org", "*", "http://[::1]:8080")


def test_serve_names_the_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["serve", "--cors-origin", "https://x.org/"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: '--cors-origin' must be origins like"), result.stderr
