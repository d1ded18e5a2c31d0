"""The dashboard in a real browser: Debian's chromium driven by Python Playwright, against a real daemon.

A ``bosun serve --port 0`` subprocess on a temp home; a task is created and results observed through
MCP calls; the page must show the task, the offloaded tokens, and update live when a new observe
arrives (no reload). Bound beyond loopback with a token, a request without it is refused.
Skipped only when chromium or Playwright is missing on a developer machine; under CI (CI=true,
where .ci/run installs both) a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon
from tests.test_observe import PYTEST_OUT

CHROMIUM = os.environ.get("BOSUN_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
WAIT_MS = 90_000  # generous: the CI machine is loaded; nothing here asserts a duration


def _browser_or_skip() -> None:
    problems = []
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        problems.append(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        problems.append("Python Playwright is not installed (pip install -e '.[dev]')")
    if problems:
        reason = "; ".join(problems)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser test cannot run in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[dict[str, Any]]:
    home = tmp_path / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                            stderr=subprocess.DEVNULL)
    try:
        info = wait_for_daemon(home, proc)
        info["base"] = info["url"].rsplit("/mcp", 1)[0]
        info["home"] = home
        yield info
    finally:
        stop(proc.pid)
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def token_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One daemon bound beyond loopback with a token, shared by the module's read-only token checks."""
    home = tmp_path_factory.mktemp("dashboard-token") / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--host", "0.0.0.0", "--port", "0", "--home", str(home)],
                            env=env_for(home, BOSUN_TOKEN="dash-s3cret"), stderr=subprocess.DEVNULL)
    try:
        yield wait_for_daemon(home, proc)["url"].rsplit("/mcp", 1)[0]
    finally:
        stop(proc.pid)
        proc.wait(timeout=20)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    _browser_or_skip()
    from playwright.async_api import async_playwright

    profile = tempfile.mkdtemp(prefix="bosun-chromium-")
    try:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                                  args=FLAGS, viewport={"width": 1400, "height": 1100})
            try:
                yield context
            finally:
                await context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return dict(result.structured_content)


async def _observe(client: Client, tid: str, text: str, command: str) -> dict[str, Any]:
    return _sc(await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "bash",
                                                  "args": {"command": command}, "result": text}))


async def test_page_shows_a_task_its_savings_and_updates_live(daemon: dict[str, Any], browser: Any,
                                                              tmp_path: Path) -> None:
    async with Client(daemon["url"]) as client:
        start = _sc(await client.call_tool("plan", {"mode": "start", "objective": "Migrate billing to Postgres",
                                                    "agent": "claude-code"}))
        tid = start["task_id"]
        first = await _observe(client, tid, PYTEST_OUT, "pytest -q")
        assert first["offloaded"] is True
        page = await browser.new_page()
        response = await page.goto(daemon["base"] + "/dashboard")
        assert response is not None and response.status == 200
        row = page.locator(f'#tasks tr[data-task="{tid}"]')
        await row.wait_for(timeout=WAIT_MS)
        assert "Migrate billing to Postgres" in await row.inner_text()
        assert "claude-code" in await row.inner_text()
        # the search narrows the table; a search that matches nothing says so
        await page.fill("#task-search", "billing postgres")
        await row.wait_for(timeout=WAIT_MS)
        await page.fill("#task-search", "no-such-task-anywhere")
        await page.locator("#tasks-none").wait_for(state="visible", timeout=WAIT_MS)
        assert await page.locator("#tasks tbody tr").count() == 0
        await page.fill("#task-search", "")
        await row.wait_for(timeout=WAIT_MS)
        offloaded = page.locator("#kpi-offloaded .value")
        await page.wait_for_function(
            "want => document.querySelector('#kpi-offloaded .value')?.textContent === want",
            arg=f"{first['tokens']:,}", timeout=WAIT_MS)
        # the largest refs list shows the offloaded result; a click fetches its outline
        ref_row = page.locator("#refs tbody tr").first
        await ref_row.wait_for(timeout=WAIT_MS)
        assert f"{first['tokens']:,}" in await ref_row.inner_text()
        await ref_row.click()
        await page.wait_for_function("() => document.querySelector('#outline').textContent.includes('lines')",
                                     timeout=WAIT_MS)
        # a new observe arrives: the page updates without a reload (SSE change notice)
        await page.wait_for_function("() => document.querySelector('#live').classList.contains('on')", timeout=WAIT_MS)
        second = await _observe(client, tid, PYTEST_OUT.replace("FAILED", "ERROR") + "\n" + PYTEST_OUT, "pytest -x")
        total = first["tokens"] + second["tokens"]
        await page.wait_for_function(
            "want => document.querySelector('#kpi-offloaded .value')?.textContent === want",
            arg=f"{total:,}", timeout=WAIT_MS)
        assert await offloaded.inner_text() == f"{total:,}"
        # a drop receipt credits the savings; the net figure follows
        drop = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": second["ref"]}))
        await page.wait_for_function(
            "want => document.querySelector('#kpi-credited .value')?.textContent === want",
            arg=f"{drop['credited_tokens']:,}", timeout=WAIT_MS)
        shot = tmp_path / "dashboard.png"
        await page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000


def test_beyond_loopback_a_request_without_the_token_is_refused(token_daemon: str) -> None:
    base = token_daemon
    for path in ("/dashboard", "/dashboard/api/stats", "/dashboard/events", "/dashboard/static/app.js"):
        try:
            urllib.request.urlopen(base + path, timeout=30)
            raise AssertionError(f"{path} was served without the token")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401, path
    req = urllib.request.Request(base + "/dashboard/api/stats", headers={"Authorization": "Bearer dash-s3cret"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        body = json.loads(resp.read())
    assert body["daemon"]["version"] and "path" not in body["daemon"]["store"]


async def test_browser_without_the_token_gets_401_and_with_it_the_page(token_daemon: str, browser: Any) -> None:
    base = token_daemon
    page = await browser.new_page()
    refused = await page.goto(base + "/dashboard")
    assert refused is not None and refused.status == 401
    await browser.set_extra_http_headers({"Authorization": "Bearer dash-s3cret"})
    page = await browser.new_page()
    ok = await page.goto(base + "/dashboard")
    assert ok is not None and ok.status == 200
    await page.wait_for_function("() => document.querySelector('#status').textContent !== 'loading…'",
                                 timeout=WAIT_MS)
