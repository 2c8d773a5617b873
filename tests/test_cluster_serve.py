"""The server on Ray Serve, on a local Ray (2 CPUs, loopback): 2 replicas of one engine each behind
one HTTP endpoint answer concurrent requests with what one engine says, and both replicas serve."""
from __future__ import annotations

import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_helpers import TINY_MODEL, speech_files, start_local_ray  # noqa: E402

from cluster.serve import REPLICA_HEADER, deployment, run  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return speech_files(tmp_path_factory.mktemp("speech"), 4)


@pytest.fixture(scope="module")
def endpoint():
    ray = start_local_ray(num_cpus=2)
    from ray import serve

    port = free_port()
    try:
        run(deployment(str(TINY_MODEL), replicas=2, cpus_per_replica=1, settings={"max_queued_files": 8}),
            host="127.0.0.1", port=port)
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


def test_two_replicas_answer_concurrent_requests_as_one_engine_would(endpoint, clips):
    import requests

    import engine

    eng = engine.load(TINY_MODEL)
    expected = {p.name: eng.transcribe(p).text for p in clips}

    def post(path):
        with open(path, "rb") as f:
            r = requests.post(f"{endpoint}/v1/audio/transcriptions", files={"file": (path.name, f, "audio/wav")},
                              data={"response_format": "json"}, timeout=120)
        return path.name, r.status_code, r.json(), r.headers.get(REPLICA_HEADER)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, [*clips, *clips]))
    assert [status for _, status, _, _ in answers] == [200] * 8
    assert all(body["text"] == expected[name] for name, _, body, _ in answers)
    replicas = {replica for *_, replica in answers}
    print("requests per replica:", {r: sum(a[3] == r for a in answers) for r in replicas})
    assert len(replicas) == 2          # one endpoint, both engines at work

    health = requests.get(f"{endpoint}/health", timeout=30).json()
    assert health["status"] == "ok"


def test_a_public_proxy_without_an_api_key_is_refused():
    app = deployment(str(TINY_MODEL), replicas=1)
    with pytest.raises(ValueError, match="api_key"):
        run(app, host="0.0.0.0")


def test_bad_deployment_settings_fail_before_any_replica_starts():
    with pytest.raises(ValueError, match="replicas"):
        deployment(str(TINY_MODEL), replicas=0)
    with pytest.raises(ValueError, match="min_replicas"):
        deployment(str(TINY_MODEL), min_replicas=3, max_replicas=2)
    with pytest.raises(ValueError, match="max_queued_files"):
        deployment(str(TINY_MODEL), settings={"max_queued_files": 0})
