"""A private PulseAudio server with a null sink, for capture tests without sound hardware.

``pulse_null_sink()`` starts ``pulseaudio`` in a fresh ``XDG_RUNTIME_DIR``
(works as root), loads a null sink ``virt`` and makes its monitor the default
source, so whatever ``paplay --device=virt`` plays can be recorded through
PortAudio's ALSA ``pulse`` device. The environment is set in ``os.environ``
and PortAudio is re-initialized if sounddevice was already imported.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class PulseUnavailable(RuntimeError):
    """The private PulseAudio server could not be started; the message says why."""


@dataclass
class PulseServer:
    """A running private server: its environment, sink and monitor source."""

    env: dict
    runtime_dir: Path
    process: subprocess.Popen
    sink: str
    source: str

    def play(self, wav) -> subprocess.Popen:
        """Start playing ``wav`` into the null sink; returns the paplay process."""
        return subprocess.Popen(["paplay", f"--device={self.sink}", str(wav)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def pactl(self, *args: str) -> str:
        done = subprocess.run(["pactl", *args], capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            raise PulseUnavailable(f"pactl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def kill(self) -> None:
        """Stop the server at once (as if the device disappeared)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)


def _rescan_portaudio() -> None:
    """Make an already-imported sounddevice re-enumerate devices with the new environment."""
    sd = sys.modules.get("sounddevice")
    if sd is not None:
        sd._terminate()
        sd._initialize()


@contextmanager
def pulse_null_sink(sink: str = "virt", timeout_s: float = 15.0):
    """Run a private PulseAudio server with a null sink; yields a PulseServer."""
    missing = [b for b in ("pulseaudio", "pactl", "paplay") if shutil.which(b) is None]
    if missing:
        raise PulseUnavailable(f"{', '.join(missing)} not found: apt-get install pulseaudio "
                               "pulseaudio-utils libasound2-plugins")
    runtime = Path(tempfile.mkdtemp(prefix="pulse-test-"))
    env = {"XDG_RUNTIME_DIR": str(runtime), "PULSE_RUNTIME_PATH": str(runtime / "pulse"),
           "PULSE_SERVER": f"unix:{runtime / 'pulse' / 'native'}"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    log = open(runtime / "pulseaudio.log", "w+")
    # HOME points into the runtime dir so the server's cookie/state never touch the real home.
    proc = subprocess.Popen(
        ["pulseaudio", "-n", "--daemonize=no", "--system=false", "--disallow-exit",
         "--exit-idle-time=-1", "--use-pid-file=no", "--realtime=no", "--high-priority=no",
         "--log-target=stderr", "--load=module-native-protocol-unix auth-anonymous=1",
         f"--load=module-null-sink sink_name={sink} rate=48000",
         "--load=module-always-sink"],
        env={**os.environ, "HOME": str(runtime)}, stdout=log, stderr=subprocess.STDOUT)
    server = PulseServer(env=env, runtime_dir=runtime, process=proc, sink=sink,
                         source=f"{sink}.monitor")
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise PulseUnavailable(f"pulseaudio exited with code {proc.returncode}:\n"
                                       + log.read()[-3000:])
            if subprocess.run(["pactl", "info"], capture_output=True).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise PulseUnavailable(f"pulseaudio did not answer within {timeout_s} s")
            time.sleep(0.1)
        server.pactl("set-default-sink", sink)
        server.pactl("set-default-source", server.source)
        _rescan_portaudio()
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        log.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(runtime, ignore_errors=True)


@contextmanager
def pulse_or_fail(**kwargs):
    """``pulse_null_sink`` for a test fixture: failing to start the server fails the test (the
    packages are installed by .ci/run), it never skips."""
    import pytest

    try:
        with pulse_null_sink(**kwargs) as server:
            yield server
    except PulseUnavailable as exc:
        pytest.fail(f"PulseAudio null sink unavailable: {exc}")
