"""The transcription server as a Ray Serve deployment: N replicas, each one engine, one endpoint.

    from cluster.serve import deployment, run
    run(deployment("models/asr-0.6b", replicas=2))       # serve.run on the current Ray cluster

Each replica loads one engine and serves the same FastAPI app as ``qwen3-asr serve``, built by
``server.app.build_app(engine, settings)`` and wrapped with ``serve.ingress``, so every route,
format and error of the single server works unchanged behind Serve's one HTTP proxy
(``/v1/audio/transcriptions``, ``/v1/models``, ``/health``, ``/metrics``, ``/v1/realtime``).

Autoscaling follows queue length: Serve counts each replica's ongoing requests (files queued or
running in its engine, plus open live sessions) and adds replicas while the average passes
``target_queue`` (``target_ongoing_requests``), down to ``min_replicas`` when it drains.

Live sessions stay on their replica: a session is one WebSocket (``/v1/realtime``), and Serve's
proxy routes a WebSocket once, when it opens, then relays its frames to that replica for as long
as it stays open; the session's stream lives in that replica's engine. A session therefore never
moves, and a replica that is scaled down waits for its open requests, sessions included, up to
``graceful_shutdown_timeout_s``. If a replica dies, its sessions end and clients reconnect (a new
session, on any replica). Every response carries ``X-Qwen3-ASR-Replica`` naming its replica.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cluster.ray_import import require_ray

REPLICA_HEADER = "X-Qwen3-ASR-Replica"


@dataclass
class ReplicaOptions:
    """What each replica loads (the CLI's ``serve`` options) and how it may be reached."""

    model: str
    aligner: str | None = None
    device: str | None = None
    dtype: str | None = None
    quantize: str | None = None
    threads: int | None = None            # torch threads per replica (CPU)
    settings: dict = field(default_factory=dict)   # server.settings.ServerSettings fields


class TranscriptionReplica:
    """One engine and the server's app over it (becomes a Serve deployment in ``deployment``)."""

    def __init__(self, options: ReplicaOptions):
        import torch

        import engine
        from cluster.worker import _resolve_model

        if options.threads:
            torch.set_num_threads(options.threads)
        self.options = options
        self.engine = engine.load(_resolve_model(options.model), device=options.device, dtype=options.dtype,
                                  quantize=options.quantize,
                                  aligner=_resolve_model(options.aligner) if options.aligner else None)

    def __serve_build_asgi_app__(self):
        """Called by serve.ingress on the replica after __init__: the server's own app over this engine."""
        from ray import serve

        from server.app import build_app
        from server.settings import ServerSettings

        app = build_app(self.engine, ServerSettings(**self.options.settings))
        replica = _replica_name(serve)

        @app.middleware("http")
        async def name_the_replica(request, call_next):
            response = await call_next(request)
            response.headers[REPLICA_HEADER] = replica
            return response

        return app


def _replica_name(serve) -> str:
    context = serve.get_replica_context()
    replica_id = getattr(context, "replica_id", None)
    return str(getattr(replica_id, "unique_id", None) or getattr(context, "replica_tag", "") or "replica")


def _check_settings(settings: dict) -> None:
    """The replicas' ServerSettings, checked on the driver so a mistake fails before any replica starts."""
    from server.settings import ServerSettings

    try:
        ServerSettings(**settings).check()
    except TypeError as exc:
        raise ValueError(f"unknown server setting: {exc}") from None


def deployment(model: str, *, replicas: int | None = 1, min_replicas: int = 1, max_replicas: int | None = None,
               target_queue: float = 4.0, cpus_per_replica: float = 1.0, gpus_per_replica: float = 0.0,
               aligner: str | None = None, device: str | None = None, dtype: str | None = None,
               quantize: str | None = None, settings: dict | None = None, name: str = "qwen3-asr"):
    """A bound Serve application: ``replicas`` fixed replicas, or (``max_replicas`` given) autoscaling
    between ``min_replicas`` and ``max_replicas`` on queue length (``target_queue`` ongoing requests
    per replica). ``settings`` are ServerSettings fields applied in every replica (max_queued_files,
    api_key, ...). Pass the result to ``run`` or ``serve.run``."""
    require_ray("serve")
    from ray import serve

    settings = dict(settings or {})
    _check_settings(settings)
    queue_cap = int(settings.get("max_queued_files", 64)) + int(settings.get("max_live_sessions", 32))
    if max_replicas is not None:
        if not 1 <= min_replicas <= max_replicas:
            raise ValueError(f"need 1 <= min_replicas <= max_replicas, got {min_replicas} and {max_replicas}")
        scaling = {"autoscaling_config": {"min_replicas": min_replicas, "max_replicas": max_replicas,
                                          "target_ongoing_requests": target_queue}}
    else:
        if not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be a whole number of at least 1, got {replicas!r}")
        scaling = {"num_replicas": replicas}
    cls = serve.ingress()(TranscriptionReplica)
    dep = serve.deployment(
        cls, name=name, max_ongoing_requests=queue_cap,
        ray_actor_options={"num_cpus": cpus_per_replica, "num_gpus": gpus_per_replica}, **scaling)
    threads = max(1, int(cpus_per_replica)) if not gpus_per_replica else None
    from cluster.worker import driver_model_name

    model, aligner = driver_model_name(model), driver_model_name(aligner) if aligner else None
    options = ReplicaOptions(model=model, aligner=aligner, device=device, dtype=dtype, quantize=quantize,
                             threads=threads, settings=settings)
    app = dep.bind(options)
    app.qwen3_asr_options = options   # for run()'s check of a public proxy
    return app


def run(app, *, host: str = "127.0.0.1", port: int = 8000, route_prefix: str = "/", name: str = "qwen3-asr",
        blocking: bool = False):
    """Start Serve's HTTP proxy on ``host:port`` (on the Ray cluster already joined) and deploy ``app``
    (from ``deployment``). A proxy that other machines can reach needs the deployment's ``api_key``."""
    require_ray("serve")
    from ray import serve

    from server.settings import is_loopback

    options = getattr(app, "qwen3_asr_options", None)
    if options is not None and not is_loopback(host) and not options.settings.get("api_key"):
        raise ValueError(f"a proxy on {host} is reachable from other machines: give the deployment an api_key "
                         "(settings={'api_key': ...})")
    serve.start(http_options={"host": host, "port": port})
    return serve.run(app, name=name, route_prefix=route_prefix, blocking=blocking)
