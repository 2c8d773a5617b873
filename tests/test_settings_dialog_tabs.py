"""The settings dialog shows every tab's name when it opens: none hidden behind scroll arrows."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QSettings  # noqa: E402

from app.settings import Settings  # noqa: E402
from app.settings.settings_dialog import SettingsDialog  # noqa: E402


def test_every_settings_tab_is_in_view_when_the_dialog_opens(qtbot, tmp_path):
    dialog = SettingsDialog(Settings(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    bar = dialog.tabs.tabBar()
    names = [bar.tabText(i) for i in range(bar.count())]
    assert "Engine" in names and "Model" in names
    for i, name in enumerate(names):
        assert bar.rect().contains(bar.tabRect(i)), f"the {name} tab is cut off"
