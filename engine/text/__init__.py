"""Text out: prompts and parsing of the model's answer, words, transcript types, cues and exports.

Pure Python (no torch). Imports nothing from the rest of ``engine`` but ``engine.errors``.
"""
