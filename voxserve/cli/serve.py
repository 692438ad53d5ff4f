"""``voxserve serve``: the HTTP/WebSocket server (OpenAI-compatible) until interrupted."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from voxserve.cli.common import add_engine_args, add_ray_args, engine_settings
from voxserve.config import Settings


def add_serve_command(sub: Any) -> None:
    """Register ``voxserve serve``."""
    p = sub.add_parser("serve", help="run the HTTP/WebSocket server (OpenAI-compatible)")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--api-key", action="append", dest="api_keys", help="accepted bearer token (repeatable)")
    p.add_argument("--data-dir", help="folder for the job database and uploads")
    p.add_argument("--webhook-secret", help="key of the HMAC-SHA256 signature on job callbacks (or set "
                   "VOXSERVE_SERVER__WEBHOOK_SECRET, which other users of this machine cannot read in ps)")
    p.add_argument("--allow-webhook-host", action="append", dest="webhook_allow_hosts", metavar="HOST",
                   help="allow job callbacks to this host, address or network although it is not public "
                   "(loopback, private, link-local; repeatable)")
    add_ray_args(p)
    add_engine_args(p)
    p.set_defaults(func=cmd_serve)


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings ``voxserve serve`` runs with: the engine's, then the server flags given."""
    server = {"host": args.host, "port": args.port, "data_dir": args.data_dir,
              "api_keys": tuple(args.api_keys) if args.api_keys else None, "webhook_secret": args.webhook_secret,
              "webhook_allow_hosts": tuple(args.webhook_allow_hosts) if args.webhook_allow_hosts else None}
    return engine_settings(args, server=server)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted."""
    import uvicorn

    from voxserve.server.app import create_app
    from voxserve.server.thread import uvicorn_config

    settings = serve_settings(args)
    logging.getLogger("voxserve").setLevel(logging.INFO)
    app = create_app(settings)
    uvicorn.Server(uvicorn_config(app, settings, settings.server.host, settings.server.port)).run()
    return 0
