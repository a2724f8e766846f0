"""``/metrics`` with ``serve --workers 2``: prometheus-client's multiprocess mode sums
every worker's counts, so any worker's scrape counts every request served."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from service import running_service

pytestmark = pytest.mark.slow
parser = pytest.importorskip("prometheus_client.parser")

TOKEN = "metrics-token-0123456789"


def _requests(base: str) -> float:
    text = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    return sum(
        s.value
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "agentsession_http_requests_total" and s.labels["route"] == "/v1/sessions"
    )


def test_every_workers_requests_are_counted(tmp_path: Path) -> None:
    settings = {"AGENTSESSION_METRICS_TOKEN": TOKEN}
    with running_service(tmp_path, workers=2, settings=settings) as service:
        before = _requests(service.url)
        for _ in range(20):  # a new connection each: the kernel spreads them
            httpx.get(f"{service.url}/v1/sessions", headers=service.headers()).raise_for_status()
        scrapes = {_requests(service.url) - before for _ in range(6)}
    assert scrapes == {20.0}
