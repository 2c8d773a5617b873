"""The README's two commands: scripts/run_app.sh and scripts/test.sh through scripts/bootstrap.sh.

The logic tests drive bootstrap.sh with a fake Python (a shell script that logs what it is asked to
do), so they check in a second what gets installed when. The clean-machine test runs the two README
commands for real in a fresh clone with a Python marked externally managed (PEP 668), where a plain
``pip install`` is refused: the scripts must make and use their own virtual environment.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = r"""#!/usr/bin/env bash
# A stand-in for python: logs its arguments; "-m venv DIR" makes DIR/bin/python (a copy of this).
echo "$0 $*" >>"$FAKE_LOG"
if [ "${1:-}" = -m ] && [ "${2:-}" = venv ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "${1:-}" = -c ] && [[ "$2" == *"import torch"* ]]; then exit 1; fi   # no torch yet
if [ "${1:-}" = -c ] && [[ "$2" == *urlopen* ]] && [ "${FAKE_INDEX_DOWN:-}" = probe ]; then exit 1; fi
if [[ " $* " == *" --index-url "* ]] && [ -n "${FAKE_INDEX_DOWN:-}" ]; then exit 1; fi   # index unusable
if [ "${1:-}" = --version ]; then echo "Python 3.11.2"; fi
exit 0
"""


def _fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "fakepy" / "python3"
    path.parent.mkdir()
    path.write_text(FAKE_PYTHON)
    path.chmod(0o755)
    return path


def _bootstrap(tmp_path, what="app", extra_env=None):
    env = dict(os.environ, PYTHON=str(tmp_path / "fakepy" / "python3"),
               QWEN3_ASR_VENV=str(tmp_path / "venv"), FAKE_LOG=str(tmp_path / "log"),
               QWEN3_ASR_SKIP_SYSTEM_CHECK="1")
    env.update(extra_env or {})
    return subprocess.run(["bash", str(ROOT / "scripts" / "bootstrap.sh"), what], env=env,
                          capture_output=True, text=True, timeout=60)


def _log(tmp_path) -> str:
    log = tmp_path / "log"
    text = log.read_text() if log.exists() else ""
    log.unlink(missing_ok=True)
    return text


def test_first_run_makes_a_venv_and_installs_into_it_later_runs_do_nothing(tmp_path):
    _fake_python(tmp_path)
    first = _bootstrap(tmp_path, "test")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(tmp_path / "venv" / "bin" / "python")
    log = _log(tmp_path)
    assert "-m venv" in log
    venv_py = str(tmp_path / "venv" / "bin" / "python")
    # Everything goes into the venv, never into the base Python; the CPU torch build comes first.
    installs = [line for line in log.splitlines() if "pip install" in line]
    assert installs and all(line.startswith(venv_py) for line in installs)
    if shutil.which("nvidia-smi") is None:
        assert any("torch==2.13.0" in line for line in installs)
    assert "-e .[test]" in installs[-1]

    again = _bootstrap(tmp_path, "test")
    assert again.returncode == 0 and again.stdout.strip() == venv_py
    assert _log(tmp_path) == "", "a second run must not run pip or even start Python"


def test_app_and_test_are_stamped_apart_and_a_changed_pyproject_reinstalls(tmp_path):
    _fake_python(tmp_path)
    assert _bootstrap(tmp_path, "app").returncode == 0
    assert "-e ." in _log(tmp_path)
    assert _bootstrap(tmp_path, "test").returncode == 0
    assert "-e .[test]" in _log(tmp_path), "the test tools were not installed"
    assert _bootstrap(tmp_path, "app").returncode == 0 and _log(tmp_path) == ""

    stamp = tmp_path / "venv" / ".bootstrap-app"
    stamp.write_text("app an-older-pyproject\n")
    assert _bootstrap(tmp_path, "app").returncode == 0
    assert "pip install" in _log(tmp_path)


def test_a_user_without_the_system_libraries_gets_the_exact_package_list(tmp_path):
    _fake_python(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("ldconfig", 'echo "0 libs found in cache"'), ("id", 'echo 1000'),
                       ("apt-get", 'echo "apt-get must not run as a user" >&2; exit 9')):
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    # Only what the script runs before it stops: this machine's own parec must not be found.
    for tool in ("bash", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(bin_dir), "QWEN3_ASR_SKIP_SYSTEM_CHECK": "0"}
    done = _bootstrap(tmp_path, "app", env)
    assert done.returncode == 1
    assert "sudo apt-get install" in done.stderr
    for package in ("libportaudio2", "libsndfile1", "libxcb-cursor0", "libxkbcommon-x11-0", "libegl1",
                    "pulseaudio-utils", "libxcb-icccm4", "libxcb-keysyms1", "libxcb-xinerama0",
                    "libxcb-util1", "libglib2.0-0", "libx11-xcb1"):   # parec and pactl: the "system audio" live input
        assert package in done.stderr
    assert not (tmp_path / "venv").exists(), "nothing is installed before the libraries are there"


def test_test_sh_passes_its_arguments_to_pytest():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert '"$@"' in script.splitlines()[-1] and " tests " not in script.splitlines()[-1]


def test_no_display_is_said_plainly_and_points_to_the_cli(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["QWEN3_ASR_DATA_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "app"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert "No display found" in done.stderr and "qwen3-asr transcribe" in done.stderr
    assert "xcb" not in done.stderr


def _externally_managed_python() -> str | None:
    """A Python that refuses plain pip installs (PEP 668), such as Debian's /usr/bin/python3."""
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if not candidate or not Path(candidate).exists():
            continue
        stdlib = subprocess.run([candidate, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                                capture_output=True, text=True).stdout.strip()
        if stdlib and (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
            return candidate
    return None


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_readme_commands_in_a_fresh_clone_with_an_externally_managed_python(tmp_path):
    python = _externally_managed_python()
    if python is None:
        pytest.fail("no Python marked EXTERNALLY-MANAGED here: install Debian's python3 and python3-venv "
                    "(apt-get install python3 python3-venv), as on a stock desktop")
    refused = subprocess.run([python, "-m", "pip", "install", "--dry-run", "six"],
                             capture_output=True, text=True)
    assert refused.returncode != 0  # the situation a new user meets: pip into it is refused
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for rel in ("scripts/bootstrap.sh", "scripts/run_app.sh", "scripts/test.sh", "pyproject.toml"):
        shutil.copy(ROOT / rel, clone / rel)  # test the working tree's scripts, committed or not
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PYTHON=python, QWEN3_ASR_DATA_DIR=str(tmp_path / "data"))
    env.pop("QWEN3_ASR_VENV", None)
    if os.environ.get("QWEN3_ASR_FULL_INSTALL_TEST") != "1":
        # Fast by default: the venv (made with the PEP 668 Python, as the script makes it) sees
        # this test run's installed packages through a .pth line, so pip finds torch, Qt and
        # the rest already there and installs only the project. Creating the venv from scratch
        # is covered by the fake-Python tests above; QWEN3_ASR_FULL_INSTALL_TEST=1 downloads
        # everything instead (tens of minutes on a busy machine).
        subprocess.run([python, "-m", "venv", str(clone / ".venv")], check=True)
        venv_site = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "-c",
             "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip()
        ours = sysconfig.get_paths()["purelib"]
        (Path(venv_site) / "zz_reuse_installed_packages.pth").write_text(ours + "\n")

    tests = subprocess.run(["bash", "scripts/test.sh", "tests/test_layers.py", "-x"], cwd=clone,
                           env=env, capture_output=True, text=True, timeout=1700)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout
    app = subprocess.run(["bash", "scripts/run_app.sh", "--version"], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=900)
    assert app.returncode == 0, app.stderr[-3000:]
    assert app.stdout.startswith("qwen3-asr-desktop ")
    venv_py = clone / ".venv" / "bin" / "python"
    # Run from outside any checkout: `python -c` puts the working directory first on sys.path,
    # and this test's own working directory is the repository that made the clone, whose app/
    # would be imported instead of the installed one.
    where = subprocess.run([str(venv_py), "-c", "import app, torch; print(app.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True,
                           check=True).stdout
    assert where.startswith(str(clone)), (
        f"the app must be installed from the clone, editable; imported from {where.strip()}")


def test_self_test_without_model_uses_the_model_saved_in_settings(tmp_path, monkeypatch,
                                                                    tiny_model_dir):
    from app import settings as S
    from app.settings import Settings

    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(tmp_path / "data"))
    env = dict(os.environ, QWEN3_ASR_DATA_DIR=str(tmp_path / "data"))
    none = subprocess.run([sys.executable, "-m", "app", "--self-test"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert none.returncode == 1 and "none saved in Settings" in none.stderr
    settings = Settings()
    settings.set(S.MODEL, str(tiny_model_dir))
    settings.sync()
    done = subprocess.run([sys.executable, "-m", "app", "--self-test"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "self-test passed" in done.stdout and str(tiny_model_dir) in done.stdout


def _installs(log: str) -> list[str]:
    return [line for line in log.splitlines() if "pip install" in line and "--upgrade pip" not in line]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA GPU")
def test_without_a_gpu_torch_comes_from_the_cpu_index_quickly_and_with_pips_progress(tmp_path):
    _fake_python(tmp_path)
    done = _bootstrap(tmp_path, "app")
    assert done.returncode == 0, done.stderr
    installs = _installs(_log(tmp_path))
    torch = installs[0]
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch and "torch==2.13.0" in torch
    assert "--retries 0" in torch and re.search(r"--timeout \d+ ", torch), "an unreachable index must not hang"
    assert len(installs) == 2 and "-e ." in installs[1]
    assert not any("--quiet" in line for line in installs), "pip's progress is shown for the big downloads"
    assert "about 190 MB to download" in done.stderr, "the size is said before the download starts"


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA GPU")
@pytest.mark.parametrize("down", ["probe", "pip"])
def test_an_unreachable_cpu_index_falls_back_to_pypi(tmp_path, down):
    """'probe': the index does not answer (one line, pip never asks it); 'pip': it answered, but pip
    could not install from it."""
    _fake_python(tmp_path)
    done = _bootstrap(tmp_path, "app", {"FAKE_INDEX_DOWN": down})
    assert done.returncode == 0, done.stderr
    installs = _installs(_log(tmp_path))
    if down == "probe":
        assert "cannot be reached" in done.stderr and not any("--index-url" in line for line in installs)
    else:
        assert "--index-url" in installs.pop(0)
    assert "torch==2.13.0" in installs[0] and "--index-url" not in installs[0]
    assert "-e ." in installs[1]
    assert "from PyPI instead" in done.stderr and "about 3 GB" in done.stderr


def _bootstrap_probes() -> tuple[set[str], set[str]]:
    """The shared libraries bootstrap.sh probes for, and those it names as pulled in by them."""
    script = (ROOT / "scripts" / "bootstrap.sh").read_text()
    probed = set(re.findall(r"so:([\w.+-]+\.so[\w.]*)", script))
    pulled = set(re.search(r'QT_PULLED_IN="([^"]*)"', script).group(1).split())
    return probed, pulled


def test_the_library_check_covers_every_library_of_qts_xcb_plugin():
    import PySide6

    qt = Path(PySide6.__file__).parent / "Qt"
    plugin = qt / "plugins" / "platforms" / "libqxcb.so"
    assert plugin.is_file()
    ldd = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=True).stdout
    system = set()
    for line in ldd.splitlines():
        match = re.match(r"\s*(\S+\.so[\w.]*) => (.*?)(?: \(0x|$)", line)
        if match and (match.group(2) == "not found" or not match.group(2).startswith(str(qt.parent))):
            system.add(match.group(1))
    probed, pulled = _bootstrap_probes()
    assert system and "libxcb-icccm.so.4" in system
    assert sorted(system - probed - pulled) == [], "add these to APP_NEEDS in scripts/bootstrap.sh"


def test_the_app_names_the_missing_xcb_libraries_instead_of_qts_misleading_message(tmp_path):
    """A fake ldd on PATH reports two libraries as missing, as on a desktop without them."""
    fake = tmp_path / "bin" / "ldd"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho '\tlibxcb-icccm.so.4 => not found'\n"
                    "echo '\tlibxcb-keysyms.so.1 => not found'\necho '\tlibc.so.6 => /lib/libc.so.6 (0x1)'\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(DISPLAY=":77", PATH=f"{fake.parent}:{env['PATH']}", QWEN3_ASR_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "app"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in done.stderr
    assert "sudo apt-get install libxcb-icccm4 libxcb-keysyms1" in done.stderr
    assert "xcb-cursor0" not in done.stderr


def test_the_apps_library_names_match_the_bootstrap():
    from app.qt_libraries import PACKAGES

    script = (ROOT / "scripts" / "bootstrap.sh").read_text()
    for library, package in PACKAGES.items():
        assert f'"{package}|' in script and f"so:{library}" in script, library
