"""The single-instance socket (issue 37): private to the user, peer uid checked, race closed by a
lock file, and a frozen first instance reported in a dialog."""
from __future__ import annotations

import getpass
import hashlib
import io
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from app import single_instance as si

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """A runtime directory of our own, so tests never meet a real app's socket."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    return folder


class Impostor:
    """A plain Unix socket server on the path the app used before (tmp + a name anyone can
    compute), answering "ok" like the app and keeping what it is sent."""

    def __init__(self, data_folder: Path):
        key = f"{getpass.getuser()}\0{data_folder.resolve()}".encode()
        self.path = Path(tempfile.gettempdir()) / ("qwen3-asr-desktop-" + hashlib.sha1(key).hexdigest()[:16])
        self.path.unlink(missing_ok=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        os.chmod(self.path, 0o777)
        self.server.listen(4)
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            self.conn, _ = self.server.accept()
            self.received += self.conn.recv(65536)
            self.conn.sendall(b"ok\n")        # kept open: the app reads the answer at its pace
        except OSError:
            pass

    def close(self):
        self.server.close()
        self.path.unlink(missing_ok=True)


def test_an_impostor_bound_to_the_old_socket_path_gets_nothing(qapp, tmp_path, runtime):
    data = tmp_path / "data"
    data.mkdir()
    impostor = Impostor(data)
    try:
        out = io.StringIO()
        try:
            guard = si.start_or_hand_over(data, ["/home/someone/secret talk.wav"], out=out)
        except SystemExit as e:
            guard = f"SystemExit({e.code})"
        assert impostor.received == b"", f"another process was sent the user's file names: {impostor.received}"
        assert isinstance(guard, si.SingleInstance), f"the app did not start ({guard}): {out.getvalue()}"
        guard.close()
    finally:
        impostor.close()


def test_socket_and_lock_live_in_a_folder_only_the_user_can_enter(qapp, tmp_path, runtime, monkeypatch):
    guard = si.SingleInstance(tmp_path / "data")
    folder = Path(guard.path).parent
    assert folder == runtime / "qwen3-asr-desktop"
    info = os.lstat(folder)
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    # a folder someone else prepared: tightened when ours, refused when another user's
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    assert si._private_dir(open_folder) and stat.S_IMODE(os.lstat(open_folder).st_mode) == 0o700
    monkeypatch.setattr(si, "_own_uid", lambda: os.getuid() + 4242)
    assert not si._private_dir(open_folder)
    link = tmp_path / "link"
    link.symlink_to(open_folder)
    monkeypatch.undo()
    assert not si._private_dir(link)


def test_files_go_only_to_a_peer_of_the_same_user(qapp, qtbot, tmp_path, runtime, monkeypatch):
    first = si.start_or_hand_over(tmp_path / "data", [])
    received = []
    first.files_received.connect(received.append)
    probe = si.QLocalSocket()
    probe.connectToServer(first.address)
    assert probe.waitForConnected(3000) and si.peer_uid(probe) == os.getuid()   # SO_PEERCRED, for real
    probe.abort()
    monkeypatch.setattr(si, "peer_uid", lambda s: os.getuid() + 4242)   # as if another user served it
    dialogs = []
    with pytest.raises(SystemExit) as exit_:
        si.start_or_hand_over(tmp_path / "data", ["/home/me/talk.wav"], out=io.StringIO(),
                              dialog=lambda *a: dialogs.append(a))
    assert exit_.value.code == 1 and "belongs to another user" in dialogs[0][1]
    qtbot.wait(200)
    assert received == []
    first.close()


def test_a_frozen_first_instance_gets_a_dialog(qapp, tmp_path, runtime, monkeypatch):
    first = si.start_or_hand_over(tmp_path / "data", [])   # its event loop never runs here: frozen
    monkeypatch.setattr(si, "ANSWER_MS", 300)
    dialogs, out = [], io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        si.start_or_hand_over(tmp_path / "data", ["a.wav"], out=out, dialog=lambda *a: dialogs.append(a))
    assert exit_.value.code == 1
    assert dialogs and "did not answer" in dialogs[0][1] and "did not answer" in out.getvalue()
    first.close()


STARTER = r"""
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.single_instance import start_or_hand_over
open(sys.argv[2], "a").close()
while open(sys.argv[3]).read() != "go":   # both processes start together
    pass
guard = start_or_hand_over(sys.argv[1], [sys.argv[4]], dialog=lambda *a: print("dialog", a))
if guard is None:
    print("handed")
    sys.exit(0)
print("first", flush=True)
guard.files_received.connect(lambda files: (print("got", files, flush=True), app.quit()))
QTimer.singleShot(20000, app.quit)
app.exec()
"""


def test_two_starts_at_the_same_moment_come_up_as_one(tmp_path, runtime):
    go = tmp_path / "go"
    go.write_text("")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "data"), str(tmp_path / f"ready{i}"),
                               str(go), f"/x/{i}.wav"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(2)]
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):
        assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs]
    go.write_text("go")
    outs = [p.communicate(timeout=60)[0] for p in procs]
    firsts = [o for o in outs if o.startswith("first")]
    assert len(firsts) == 1 and sum(o.startswith("handed") for o in outs) == 1, outs
    assert "got [" in firsts[0]
