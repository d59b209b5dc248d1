"""Who may call the API: the token (bearer or the login cookie), Origin checks on unsafe methods,
and body caps (413 in the envelope)."""

from __future__ import annotations

import pytest

from roleplay.web.security import safe_next
from web.web_support import api_client

pytestmark = pytest.mark.anyio

API = "/api/v1"
TOKEN = "s3cret-token"


async def test_with_a_token_every_request_needs_it(db_url: str) -> None:
    async with api_client(db_url, token=TOKEN) as (client, _):
        anonymous = await client.get(f"{API}/sessions")
        assert anonymous.status_code == 401 and anonymous.json()["code"] == "http.auth_required"
        assert anonymous.headers["www-authenticate"] == "Bearer"
        wrong = await client.get(f"{API}/sessions", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert (await client.get(f"{API}/sessions", headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 200
        assert (await client.get(f"{API}/health")).status_code == 200  # open: load balancers probe it
        assert (await client.get(f"{API}/openapi.json")).status_code == 401


async def test_the_login_page_sets_an_httponly_strict_cookie(db_url: str) -> None:
    async with api_client(db_url, token=TOKEN) as (client, _):
        page = await client.get("/login")
        assert page.status_code == 200 and 'name="token"' in page.text.replace("name=token", 'name="token"')
        bad = await client.post("/login", data={"token": "nope"})
        assert bad.status_code == 303 and bad.headers["location"] == "/login?error=true" and "set-cookie" not in bad.headers
        good = await client.post("/login", data={"token": TOKEN})
        cookie = good.headers["set-cookie"]
        assert good.status_code == 303 and cookie.startswith(f"rp_token={TOKEN}")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("SameSite=Strict", "SameSite=strict")
        client.cookies.set("rp_token", TOKEN)
        assert (await client.get(f"{API}/sessions")).status_code == 200


async def test_cross_origin_writes_are_403_and_same_origin_ones_pass(db_url: str) -> None:
    async with api_client(db_url, allowed_origins=("http://ui.example",)) as (client, _):
        body = {"kind": "persona", "data": {"name": "M", "description": "x"}}
        evil = await client.post(f"{API}/assets", json=body, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403 and evil.json()["code"] == "http.cross_origin"
        site = await client.post(f"{API}/assets", json=body, headers={"Sec-Fetch-Site": "cross-site"})
        assert site.status_code == 403
        assert (await client.post(f"{API}/assets", json=body, headers={"Origin": "http://testserver"})).status_code == 201
        assert (await client.post(f"{API}/assets", json=body, headers={"Origin": "http://ui.example"})).status_code == 201
        assert (await client.post(f"{API}/assets", json=body)).status_code == 201  # not a browser: no Origin
        # reads are not state-changing: another origin may read (CORS headers are not sent, so a page cannot)
        assert (await client.get(f"{API}/assets", headers={"Origin": "http://evil.example"})).status_code == 200


async def test_bodies_over_the_cap_are_413_also_without_a_length(db_url: str) -> None:
    async with api_client(db_url, max_body_bytes=1000) as (client, _):
        big = {"kind": "persona", "data": {"name": "M", "description": "x" * 5000}}
        declared = await client.post(f"{API}/assets", json=big)
        assert declared.status_code == 413 and declared.json()["code"] == "http.too_large"

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(10):
                yield b" " * 500

        streamed = await client.post(f"{API}/assets", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413 and streamed.json()["code"] == "http.too_large"


async def test_logout_clears_the_cookie(db_url: str) -> None:
    async with api_client(db_url, token=TOKEN) as (client, _):
        out = await client.post("/logout", headers={"Authorization": f"Bearer {TOKEN}"})
        assert out.status_code == 200 and out.headers["set-cookie"].startswith('rp_token=""')


async def test_a_browser_asking_for_a_page_without_the_token_goes_to_the_login_and_back(db_url: str) -> None:
    async with api_client(db_url, token=TOKEN) as (client, _):
        html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
        home = await client.get("/", headers=html)
        assert home.status_code == 303 and home.headers["location"] == "/login?next=%2F"
        story = await client.get("/s/abc?show=all", headers=html)
        assert story.status_code == 303 and story.headers["location"] == "/login?next=%2Fs%2Fabc%3Fshow%3Dall"
        # API calls, scripts' fetches and static files keep the 401 envelope
        for path, headers in (
            (f"{API}/sessions", html),
            ("/", {"Accept": "application/json"}),
            ("/static/app.css", {"Accept": "text/css"}),
        ):
            r = await client.get(path, headers=headers)
            assert r.status_code == 401 and r.json()["code"] == "http.auth_required", path
        posted = await client.post("/settings", headers=html)
        assert posted.status_code == 401
        login = await client.get("/login?next=%2Fs%2Fabc%3Fshow%3Dall")
        assert 'name=next value="/s/abc?show=all"' in login.text
        good = await client.post("/login", data={"token": TOKEN, "next": "/s/abc?show=all"})
        assert good.status_code == 303 and good.headers["location"] == "/s/abc?show=all"
        bad = await client.post("/login", data={"token": "nope", "next": "/library/card"})
        assert bad.headers["location"] == "/login?error=true&next=%2Flibrary%2Fcard"
        plain = await client.post("/login", data={"token": TOKEN})
        assert plain.headers["location"] == "/"  # not the API docs: the app's start page


@pytest.mark.parametrize(
    "given",
    [
        "//evil.example/x",
        "/\\evil.example",
        "https://evil.example/",
        "http:/x",
        "javascript:alert(1)",
        "evil",
        "",
        "/\t/evil",
        "/login?next=//evil",
        "/s/x\x7f",
    ],
)
async def test_login_never_redirects_off_the_server(db_url: str, given: str) -> None:
    assert safe_next(given) == "/"
    async with api_client(db_url, token=TOKEN) as (client, _):
        r = await client.post("/login", data={"token": TOKEN, "next": given})
        assert r.status_code == 303 and r.headers["location"] == "/"
        page = await client.get("/login", params={"next": given})
        assert 'name=next value="/"' in page.text


def test_local_paths_are_kept() -> None:
    for path in ("/", "/s/abc", "/library/card?q=a%20b", "/s/x#end"):
        assert safe_next(path) == path
