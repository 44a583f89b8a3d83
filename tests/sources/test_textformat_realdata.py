"""Our 0.0.4 reader against prometheus_client's parser and detect_profile, on real dumps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pdcensus.series.profiles import detect_profile
from pdcensus.sources.textformat import parse_scrape, read_prometheus_text
from shared_data import REAL_METRICS

REALDATA = REAL_METRICS
DUMPS = {
    "vllm-0.4.3": REALDATA / "vllm-0.4.3_opt-125m_datadog-fixture.prom",
    "vllm-0.7-partial": REALDATA / "vllm-0.7-v0_qwen2.5-coder-1.5b_aibrix-docs_PARTIAL.prom",
    "sglang-0.3": REALDATA / "sglang-0.3.x_llama-3.1-8b_sglang-docs.prom",
}
FAMILIES_0_26 = REALDATA / "vllm-0.26.0-cpu_metric-families_inference-perf.txt"
SCRAPE_TIME = 1_718_140_600.0


def synthetic_scrape_from_family_list(path: Path) -> str:
    """A 0.0.4 scrape with one sample per sample name of each listed (family, type)."""
    lines: list[str] = []
    for raw in path.read_text().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        family, kind = raw.split()
        lines.append(f"# TYPE {family} {kind}")
        labels = '{engine="0",model_name="m"}'
        if kind == "histogram":
            for le in ("0.5", "+Inf"):
                lines.append(f'{family}_bucket{{engine="0",le="{le}",model_name="m"}} 1.0')
            lines += [f"{family}_count{labels} 1.0", f"{family}_sum{labels} 0.25"]
        else:
            lines.append(f"{family}{labels} 1.0")
    return "\n".join(lines) + "\n"


def texts() -> dict[str, str]:
    out = {name: path.read_text() for name, path in DUMPS.items()}
    out["vllm-0.26.0-synthetic"] = synthetic_scrape_from_family_list(FAMILIES_0_26)
    return out


def reference_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """prometheus_client's reading: (sample name, labels without empty values) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if v != ""))
            out[(sample.name, labels)] = sample.value
    return out


def same_value(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("name", sorted(texts()))
def test_reader_agrees_with_prometheus_client_sample_by_sample(name: str) -> None:
    text = texts()[name]
    recording = parse_scrape(text, scrape_time=SCRAPE_TIME, job="j", instance="i")
    endpoint = recording.endpoint()
    ours = {}
    for key, ts, values in endpoint.iter_series():
        if key.name == "up":
            continue
        assert list(ts) == [SCRAPE_TIME]
        ours[(key.name, key.without("job", "instance").labels)] = float(values[0])
    reference = reference_samples(text)
    assert ours.keys() == reference.keys()
    differing = [k for k in ours if not same_value(ours[k], reference[k])]
    assert differing == []


@pytest.mark.parametrize("name", sorted(texts()))
def test_reader_keeps_every_declared_family_type(name: str) -> None:
    text = texts()[name]
    recording = parse_scrape(text, scrape_time=SCRAPE_TIME)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert recording.type_of(sample.name).value == family.type.replace("untyped", "unknown")


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        pytest.param("vllm-0.4.3", "vllm-v0", id="vllm-0.4.3"),
        pytest.param("vllm-0.7-partial", "vllm-v0", id="vllm-0.7"),
        pytest.param("sglang-0.3", "sglang", id="sglang"),
        pytest.param("vllm-0.26.0-synthetic", "vllm-v1", id="vllm-0.26.0"),
    ],
)
def test_each_real_dump_is_detected_as_its_engine_profile(name: str, profile: str) -> None:
    recording = parse_scrape(texts()[name], scrape_time=SCRAPE_TIME)
    detection = detect_profile(recording.endpoint().names())
    assert detection is not None
    assert detection.profile.name == profile


def test_partial_dump_loads_its_cut_histogram_without_inventing_buckets() -> None:
    path = DUMPS["vllm-0.7-partial"]
    recording = read_prometheus_text(path, scrape_time=SCRAPE_TIME)
    endpoint = recording.endpoint()
    buckets = endpoint.select("vllm:iteration_tokens_total_bucket")
    les = sorted(float(k.label("le") or "nan") for k in buckets)
    written = path.read_text().count("vllm:iteration_tokens_total_bucket{")
    assert len(les) == written
    assert max(les) == 96.0 and not any(math.isinf(le) for le in les)
    assert endpoint.select("vllm:iteration_tokens_total_count") == []
    assert endpoint.select("vllm:iteration_tokens_total_sum") != []


def test_single_scrape_gets_file_stem_instance_default_job_and_synthetic_up() -> None:
    path = DUMPS["sglang-0.3"]
    recording = read_prometheus_text(path, scrape_time=SCRAPE_TIME)
    endpoint = recording.endpoint()
    assert (endpoint.job, endpoint.instance) == ("pdcensus", path.stem)
    up = endpoint.select("up")
    assert len(up) == 1
    ts, values = endpoint.samples(up[0])
    assert list(ts) == [SCRAPE_TIME] and list(values) == [1.0]


def test_empty_label_values_are_dropped_like_prometheus_does() -> None:
    recording = read_prometheus_text(DUMPS["vllm-0.7-partial"], scrape_time=SCRAPE_TIME)
    (key,) = recording.endpoint().select("vllm:lora_requests_info")
    assert key.label("running_lora_adapters") is None
    assert key.label("max_lora") == "0"


def test_histogram_bucket_counts_match_the_dump() -> None:
    text = DUMPS["sglang-0.3"].read_text()
    endpoint = parse_scrape(text, scrape_time=SCRAPE_TIME).endpoint()
    keys = endpoint.select("sglang:time_to_first_token_seconds_bucket")
    values = np.array([endpoint.column(k)[0][0] for k in keys])
    reference = reference_samples(text)
    expected = [reference[(k.name, k.without("job", "instance").labels)] for k in keys]
    assert values.tolist() == expected
