"""One app per data folder: a second start hands its files to the running one and exits.

Two instances on one data folder would both resume the same unfinished files and
both write their transcripts. The first instance listens on a local socket named
after the data folder (QLocalServer); a later start connects (QLocalSocket), sends
its command-line files as one JSON line, and the running window comes to the front
and queues them.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

HANDED, NONE, NO_ANSWER = "handed", "none", "no answer"


def server_name(data_folder) -> str:
    """A socket name unique to the user and the data folder (one app per folder)."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in a bare container: the folder alone still separates apps
        user = ""
    key = f"{user}\0{Path(data_folder).expanduser().resolve()}".encode("utf-8", "surrogateescape")
    return "qwen3-asr-desktop-" + hashlib.sha1(key).hexdigest()[:16]


class SingleInstance(QObject):
    """``hand_over(files)`` in a second start; ``listen()`` in the first, which then emits
    ``files_received`` (a list of absolute paths, maybe empty) for every later start."""

    files_received = Signal(list)

    def __init__(self, data_folder, parent=None):
        super().__init__(parent)
        self.name = server_name(data_folder)
        self.server: QLocalServer | None = None

    def hand_over(self, files, connect_ms: int = 3000, answer_ms: int = 30000) -> str:
        """Send ``files`` to a running instance: "handed", "none" (no instance is running) or
        "no answer" (one is running but did not answer in time: busy or hung)."""
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(connect_ms):
            return NONE
        message = json.dumps({"files": [str(Path(f).absolute()) for f in files]}) + "\n"
        socket.write(message.encode("utf-8"))
        # A running app busy starting up (loading a model) may take a while to read it.
        answered = socket.waitForBytesWritten(answer_ms) and socket.waitForReadyRead(answer_ms) \
            and bytes(socket.readAll().data()).startswith(b"ok")
        socket.disconnectFromServer()
        return HANDED if answered else NO_ANSWER

    def listen(self) -> bool:
        """Become the running instance; False (logged) when the socket cannot be created."""
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not self.server.listen(self.name):
            # nobody answered hand_over, so a socket file left by a crashed instance is stale
            QLocalServer.removeServer(self.name)
            if not self.server.listen(self.name):
                log.warning("single instance: cannot listen on %s (%s); a second start will not be "
                            "redirected here", self.name, self.server.errorString())
                return False
        self.server.newConnection.connect(self._accept)
        return True

    def _accept(self) -> None:
        while self.server is not None and self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            socket.setProperty("buffer", b"")
            socket.readyRead.connect(lambda s=socket: self._read(s))
            # no deleteLater on disconnect: the server owns its sockets and deletes them with itself

    def _read(self, socket: QLocalSocket) -> None:
        data = socket.property("buffer") + bytes(socket.readAll().data())
        socket.setProperty("buffer", data)
        if b"\n" not in data:
            return
        try:
            files = json.loads(data.split(b"\n", 1)[0].decode("utf-8")).get("files", [])
            files = [str(f) for f in files if isinstance(f, str)]
        except (ValueError, AttributeError) as exc:
            log.warning("single instance: ignored a malformed message (%s)", exc)
            files = []
        socket.write(b"ok\n")
        socket.flush()
        log.info("single instance: a second start handed over %d file(s)", len(files))
        self.files_received.emit(files)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def bring_to_front(window) -> None:
    """Show a window that may be minimised or behind others, and give it the focus."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()


def start_or_hand_over(data_folder, files, out=None) -> SingleInstance | None:
    """The guard of this, the first, instance; or None after handing ``files`` to the one
    already running on ``data_folder`` (this start should then exit). SystemExit(1) when one
    is running but does not answer: a second app on the same data is never started."""
    import sys

    guard = SingleInstance(data_folder)
    outcome = guard.hand_over(files)
    if outcome == HANDED:
        count = len(files)
        print(f"Qwen3 ASR Desktop is already running for {data_folder}: brought it to the front"
              + (f" and handed it {count} file{'s' if count != 1 else ''}." if count else "."),
              file=out or sys.stderr)
        return None
    if outcome == NO_ANSWER:   # never a second app on the same data: both would resume the same files
        print(f"Qwen3 ASR Desktop is already running for {data_folder} but did not answer; not starting "
              f"a second copy. Close the running app (or end it if it hangs) and start again.",
              file=out or sys.stderr)
        raise SystemExit(1)
    guard.listen()
    return guard
