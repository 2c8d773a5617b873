"""The languages Qwen3-ASR knows, for the language pickers."""
from __future__ import annotations

# Kept in sync with engine.text.prompt.LANGUAGES; listed here so that building a
# combo box does not import the engine package (and torch) in the UI thread.
LANGUAGES = (
    "Arabic", "Cantonese", "Chinese", "Czech", "Danish", "Dutch", "English", "Filipino",
    "Finnish", "French", "German", "Greek", "Hindi", "Hungarian", "Indonesian", "Italian",
    "Japanese", "Korean", "Macedonian", "Malay", "Persian", "Polish", "Portuguese", "Romanian",
    "Russian", "Spanish", "Swedish", "Thai", "Turkish", "Vietnamese",
)
AUTO = "Detect automatically"


def fill_language_combo(combo, current: str | None) -> None:
    """Items: 'Detect automatically' (data "") then every language (data = its name)."""
    combo.clear()
    combo.addItem(AUTO, "")
    for name in LANGUAGES:
        combo.addItem(name, name)
    index = combo.findData(current or "")
    combo.setCurrentIndex(max(0, index))
