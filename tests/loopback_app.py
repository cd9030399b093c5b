"""An aiohttp application served on 127.0.0.1 from a background thread: the local stand-ins (a judge, a site) that
tests start real processes against."""

import asyncio
import threading

from aiohttp import web


class LoopbackApp:
    """``with LoopbackApp(app) as origin:`` serves ``app`` at ``origin`` (``http://127.0.0.1:PORT``) until the block
    ends."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        assert self._ready.wait(30), "the loopback server did not start"
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def _serve(self) -> None:
        async def start() -> None:
            runner = web.AppRunner(self.app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]

        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()
