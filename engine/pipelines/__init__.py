"""Pipelines that combine the layers below: file jobs, live streams, the forced aligner.

They read audio (``engine.audio``), run requests through the step loop
(``engine.serving``) and turn tokens into transcripts (``engine.text``).
"""
