"""Serving: the step loop that runs many requests in shared steps over one network.

Requests, the scheduler, the paged KV cache, the model runner, attention backends and
CUDA graphs. Imports ``engine.network`` (and ``asr_kernels``), nothing above it.
"""
