"""An OpenAI-compatible transcription server over one engine (``server.app.build_app``), and its client.

``server.client`` needs only the standard library (and ``websockets`` for live
sessions): the CLI's ``--server`` and the app's "Server" engine use it. The rest
needs the ``server`` extra: ``pip install 'qwen3-asr-desktop[server]'``.
"""
