"""The console's web application: the page and its script, one JSON document per section, and the live stream of
sections (server-sent events) that the page follows, all read-only and behind the access gate."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from swarmlog.artifacts import ArtifactError, ArtifactMissing, open_store
from swarmlog.console import pages
from swarmlog.console.access import ConsoleSettings, Gate
from swarmlog.console.feed import Feed
from swarmlog.console.replaying import Replays
from swarmlog.errors import ConfigError, SwarmlogError
from swarmlog.schemas.artifacts import parse

STATIC = Path(__file__).with_name("static")
Section = Callable[[str, "str | None"], Any]
"""A section of the page by name (and mission id), as JSON-ready data as of now."""
SWARM_EVERY_S = 1.0
"""The sections showing ages (AGING) are sent at least this often: their ages grow with no event."""
AGING = ("swarm", "waits")
COALESCE_S = 0.2
"""A stream sends at most one update of a section in this time, however many events changed it (well under the 1 s
from commit to page)."""
PING_S = 15.0
SECTIONS = ("status", "swarm", "missions", "waits", "deadletters")


def application(feed: Feed, access: ConsoleSettings) -> ASGIApp:
    """The console's ASGI application over a feed, behind its gate."""

    def section(name: str, mission_id: str | None = None) -> Any:
        """One section of the page (`Section`)."""
        match name:
            case "status":
                return feed.status()
            case "swarm":
                return pages.swarm(feed.view, feed.settings.region_names, feed.clock())
            case "missions":
                return pages.missions(feed.view)
            case "deadletters":
                return pages.dead_letters(feed.view)
            case "waits":
                return pages.waits(feed.view, feed.clock())
            case _:
                return pages.mission(feed.view, mission_id or "")

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def document(request: Request) -> Response:
        name = request.path_params["section"]
        return _json(section(name, None)) if name in SECTIONS else _json({"error": f"no section {name!r}"}, 404)

    async def mission_document(request: Request) -> Response:
        found = pages.mission(feed.view, request.path_params["mission_id"])
        return _json(found) if found is not None else _json({"error": "no such mission in the view"}, 404)

    replays = Replays(feed.settings)

    async def replay(request: Request) -> Response:
        asked = request.query_params
        try:
            found = await replays.state(
                feed.view, asked.get("component", ""), asked.get("key") or None, asked.get("at")
            )
        except ConfigError as exc:
            return _json({"error": str(exc)}, 400)
        except SwarmlogError as exc:
            return _json({"error": str(exc)}, 503)
        return _json(found)

    artifacts = open_store(feed.settings)

    async def artifact(request: Request) -> Response:
        ref = parse(request.path_params["ref"])
        if ref is None:
            return _json({"error": "not an artifact reference: artifact:sha256:<64 hex digits>:<size>"}, 400)
        try:
            data = await asyncio.to_thread(artifacts.get, ref)
        except ArtifactMissing as exc:
            return _json({"error": str(exc)}, 404)
        except ArtifactError as exc:
            return _json({"error": str(exc)}, 500)
        return Response(data, media_type="text/plain; charset=utf-8")

    async def stream(request: Request) -> Response:
        mission_id = request.query_params.get("mission") or None
        return StreamingResponse(
            _updates(feed, section, mission_id),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    routes = [
        Route("/", index),
        Route("/api/stream", stream),
        Route("/api/replay", replay),
        Route("/api/artifacts/{ref:str}", artifact),
        Route("/api/missions/{mission_id:str}", mission_document),
        Route("/api/{section:str}", document),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Gate(Starlette(routes=routes), access)


def _json(data: Any, status: int = 200) -> Response:
    """A JSON response (msgspec: a float that is not finite is written as null)."""
    return Response(msgspec.json.encode(data), status, media_type="application/json")


async def _updates(feed: Feed, section: Section, mission_id: str | None) -> AsyncIterator[bytes]:
    """Server-sent events: every section at once, then each section again when it changed (those in AGING at least
    every SWARM_EVERY_S), at most one update a section per COALESCE_S; a ping comment keeps proxies open."""
    names = [*SECTIONS, *(["mission"] if mission_id else [])]
    sent: dict[str, int] = {}
    sent_at: dict[str, float] = {}
    pinged_at = 0.0
    clock = asyncio.get_running_loop().time
    yield b"retry: 1000\n\n"
    while True:
        wake = feed.wake
        for name in names:
            key = f"mission:{mission_id}" if name == "mission" else name
            aging = name in AGING and clock() - sent_at.get(name, 0.0) >= SWARM_EVERY_S
            if not (aging or feed.since(key) > sent.get(key, -1)):
                continue
            sent[key], sent_at[name] = feed.version, clock()
            pinged_at = clock()
            yield b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(section(name, mission_id)) + b"\n\n"
        if clock() - pinged_at >= PING_S:
            pinged_at = clock()
            yield b": ping\n\n"
        await asyncio.sleep(COALESCE_S)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SWARM_EVERY_S):
                await wake.wait()
