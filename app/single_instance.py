"""One app per data folder: a second start hands its files to the running one and exits.

Two instances on one data folder would both resume the same unfinished files and
both write their transcripts. The first instance takes a lock file and listens on a
local socket named after the data folder (QLocalServer); a later start finds the lock
taken, connects (QLocalSocket), sends its command-line files as one JSON line, and the
running window comes to the front and queues them.

On Unix the socket and its lock live in a folder only this user can enter: the
user's runtime directory (``$XDG_RUNTIME_DIR/qwen3-asr-desktop``) or else
``<tmp>/qwen3-asr-desktop-<uid>``, created mode 0700 and refused when another user
owns it. Both ends also check the peer's uid (SO_PEERCRED), so file names never go to
another user's process and another user cannot queue files here. The lock file
(flock, released by the kernel when the process dies, also after kill -9) makes two
starts in the same millisecond come up as one app and one hand-over. Elsewhere
(Windows: a named pipe) QLocalServer's user-only access is what guards it.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import socket as pysocket
import stat
import struct
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

HANDED, NONE, NO_ANSWER, STRANGER = "handed", "none", "no answer", "another user"
POSIX = os.name == "posix"
ANSWER_MS = 30000   # a running app busy starting up (loading a model) may take a while to answer


def server_name(data_folder) -> str:
    """A socket name unique to the user and the data folder (one app per folder)."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in a bare container: the folder alone still separates apps
        user = ""
    key = f"{user}\0{Path(data_folder).expanduser().resolve()}".encode("utf-8", "surrogateescape")
    return "qwen3-asr-desktop-" + hashlib.sha1(key).hexdigest()[:16]


def _own_uid() -> int:
    return os.getuid()


def _private_dir(folder: Path) -> bool:
    """Whether ``folder`` is (or could be made) a real folder owned by us that only we can enter."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode):
            log.warning("single instance: %s is not a folder (a link?); not used", folder)
            return False
        if info.st_uid != _own_uid():
            log.warning("single instance: %s belongs to uid %d, not to this user; not used", folder, info.st_uid)
            return False
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(folder, 0o700)
        return True
    except OSError as e:
        log.info("single instance: cannot use %s (%s)", folder, e)
        return False


def socket_dir() -> Path | None:
    """The private folder for the socket and its lock, or None when none is safe to use (Unix only)."""
    candidates = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute() and Path(runtime).is_dir():
        candidates.append(Path(runtime) / "qwen3-asr-desktop")
    candidates.append(Path(tempfile.gettempdir()) / f"qwen3-asr-desktop-{_own_uid()}")
    return next((folder for folder in candidates if _private_dir(folder)), None)


def peer_uid(socket: QLocalSocket | QLocalServer | int) -> int | None:
    """The uid of the process at the other end of a connected local socket, or None when the
    system cannot say (not Linux or macOS)."""
    fd = int(socket if isinstance(socket, int) else socket.socketDescriptor())
    if fd < 0:
        return None
    sock = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM, fileno=os.dup(fd))
    try:
        if hasattr(pysocket, "SO_PEERCRED"):           # Linux: struct ucred {pid, uid, gid}
            _, uid, _ = struct.unpack("3i", sock.getsockopt(pysocket.SOL_SOCKET, pysocket.SO_PEERCRED,
                                                            struct.calcsize("3i")))
            return uid
        if sys.platform == "darwin":                   # LOCAL_PEERCRED: struct xucred {version, uid, ...}
            _, uid = struct.unpack("2I", sock.getsockopt(0, 1, 76)[:8])
            return uid
    except OSError:
        return None
    finally:
        sock.close()
    return None


class SingleInstance(QObject):
    """``hand_over(files)`` in a second start; ``listen()`` in the first, which then emits
    ``files_received`` (a list of absolute paths, maybe empty) for every later start."""

    files_received = Signal(list)

    def __init__(self, data_folder, parent=None):
        super().__init__(parent)
        self.name = server_name(data_folder)
        folder = socket_dir() if POSIX else None
        # the full socket path on Unix; None there when no private folder could be had
        self.path: str | None = str(folder / f"{self.name[-16:]}.sock") if folder else None
        self.address = self.path if POSIX else self.name
        self.server: QLocalServer | None = None
        self._lock_fd: int | None = None

    def take_lock(self) -> bool:
        """Become the one instance for this data folder: True when the lock is ours now."""
        if not POSIX:
            return False            # no lock file: hand_over tells whether one is running
        if self.path is None:
            return True             # no private folder: run, without single-instance
        import fcntl

        fd = os.open(self.path[:-len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def hand_over(self, files, connect_ms: int = 3000, answer_ms: int | None = None) -> str:
        """Send ``files`` to a running instance: "handed", "none" (no instance is running),
        "no answer" (one is running but did not answer in time: busy or hung), or "another
        user" (the socket's owner is not this user: nothing was sent)."""
        if self.address is None:
            return NONE
        socket = QLocalSocket()
        deadline = time.monotonic() + connect_ms / 1000
        while True:       # the first instance may hold the lock and not listen yet: retry briefly
            socket.connectToServer(self.address)
            if socket.waitForConnected(max(1, int((deadline - time.monotonic()) * 1000))):
                break
            if time.monotonic() >= deadline:
                return NONE
            time.sleep(0.05)
        uid = peer_uid(socket) if POSIX else None
        if uid is not None and uid != _own_uid():
            log.warning("single instance: %s is served by uid %d, not by this user; sent nothing",
                        self.address, uid)
            socket.abort()
            return STRANGER
        message = json.dumps({"files": [str(Path(f).absolute()) for f in files]}) + "\n"
        socket.write(message.encode("utf-8"))
        answer_ms = ANSWER_MS if answer_ms is None else answer_ms
        answered = socket.waitForBytesWritten(answer_ms) and socket.waitForReadyRead(answer_ms) \
            and bytes(socket.readAll().data()).startswith(b"ok")
        socket.disconnectFromServer()
        return HANDED if answered else NO_ANSWER

    def listen(self) -> bool:
        """Become the running instance; False (logged) when the socket cannot be created."""
        if self.address is None:
            log.warning("single instance: no private folder for the socket; a second start will not be "
                        "redirected here")
            return False
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if POSIX and self._lock_fd is not None:
            QLocalServer.removeServer(self.address)   # we hold the lock: a socket file here is stale
        if not self.server.listen(self.address):
            # nobody answered hand_over, so a socket file left by a crashed instance is stale
            QLocalServer.removeServer(self.address)
            if not self.server.listen(self.address):
                log.warning("single instance: cannot listen on %s (%s); a second start will not be "
                            "redirected here", self.address, self.server.errorString())
                return False
        self.server.newConnection.connect(self._accept)
        return True

    def _accept(self) -> None:
        while self.server is not None and self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            uid = peer_uid(socket) if POSIX else None
            if uid is not None and uid != _own_uid():
                log.warning("single instance: refused a connection from uid %d", uid)
                socket.abort()
                continue
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
        if self._lock_fd is not None:
            os.close(self._lock_fd)   # releases the lock
            self._lock_fd = None


def bring_to_front(window) -> None:
    """Show a window that may be minimised or behind others, and give it the focus."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()


def show_problem(title: str, text: str) -> None:
    """A message box the user sees also when the app was started from a menu (no terminal)."""
    from PySide6.QtWidgets import QApplication, QMessageBox

    if QApplication.instance() is None or QApplication.platformName() in ("offscreen", "minimal"):
        return
    QMessageBox.warning(None, title, text)


def start_or_hand_over(data_folder, files, out=None, dialog=None) -> SingleInstance | None:
    """The guard of this, the first, instance; or None after handing ``files`` to the one
    already running on ``data_folder`` (this start should then exit). SystemExit(1) when one
    is running but does not answer (a dialog says so, as well as stderr): a second app on the
    same data is never started. ``dialog(title, text)`` defaults to a message box."""
    guard = SingleInstance(data_folder)
    if guard.take_lock():
        guard.listen()
        return guard
    outcome = guard.hand_over(files)
    if outcome == HANDED:
        count = len(files)
        print(f"Qwen3 ASR Desktop is already running for {data_folder}: brought it to the front"
              + (f" and handed it {count} file{'s' if count != 1 else ''}." if count else "."),
              file=out or sys.stderr)
        return None
    if outcome == NONE and not POSIX:
        guard.listen()
        return guard
    if outcome == STRANGER:
        text = (f"The app's socket ({guard.address}) belongs to another user, so your files were not sent "
                f"there. Not starting a second copy.")
    else:   # locked, but no answer (hung, or still holding the lock while it quits)
        text = (f"Qwen3 ASR Desktop is already running for {data_folder} but did not answer; not starting "
                f"a second copy. Close the running app (or end it if it hangs) and start again.")
    print(text, file=out or sys.stderr)
    (dialog or show_problem)("Qwen3 ASR Desktop is already running", text)
    raise SystemExit(1)
