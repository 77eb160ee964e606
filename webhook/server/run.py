"""gunicorn in the foreground with the webhook's settings, for ``python -m webhook``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication


class _Server(BaseApplication):
    def __init__(self, settings: dict[str, Any], load: Callable[[], Any]) -> None:
        self._settings = settings
        self._load = load
        super().__init__()  # reads the settings (load_config) at once

    def load_config(self) -> None:
        for key, value in self._settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self._load()


def serve(settings: dict[str, Any], load: Callable[[], Any]) -> None:
    """Run gunicorn with ``settings`` (``gunicorn_conf.settings``) until it stops;
    ``load`` builds the WSGI app and runs in each worker after fork."""
    _Server(settings, load).run()
