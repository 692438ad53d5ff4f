"""The web page: ``GET /`` returns ``web/index.html``; ``/web/...`` serves its scripts, styles and audio
worklets (plain ES modules, no build step). The files ship inside the package (``voxserve/server/web``).

The page itself needs no API key (it holds no data); every request it makes to the API sends the key the
user pastes into it.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter, FastAPI
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

WEB_DIR = Path(__file__).with_name("web")
router = APIRouter()
_NO_CACHE = {"Cache-Control": "no-cache"}  # revalidate: an upgraded server never runs an old page
# Module scripts must come as JavaScript; some systems (Windows registries) map .js to text/plain.
mimetypes.add_type("text/javascript", ".js")


@router.get("/", include_in_schema=False)
async def index() -> Response:
    """The page."""
    return FileResponse(WEB_DIR / "index.html", media_type="text/html", headers=_NO_CACHE)


class _Static(StaticFiles):
    """Static files, revalidated on each load (ETag / Last-Modified make that cheap)."""

    def file_response(self, *args, **kwargs) -> Response:  # type: ignore[no-untyped-def]
        response = super().file_response(*args, **kwargs)
        response.headers.update(_NO_CACHE)
        return response


def install(app: FastAPI) -> None:
    """Add the page's routes to ``app`` (``include_router`` does not carry mounts, so this mounts too)."""
    app.include_router(router)
    app.mount("/web", _Static(directory=WEB_DIR), name="web")
