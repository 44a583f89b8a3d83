"""Bad input gives one RecordingParseError naming the line; odd but valid input is read right."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdcensus.errors import DataError, RecordingParseError
from pdcensus.sources.load import load_source
from pdcensus.sources.textformat import TextFormat, parse_scrape, read_openmetrics, read_text

BAD_INPUTS = [
    pytest.param(b"", 1, "empty file", id="empty-file"),
    pytest.param(b"g 1 1.0\ng 2 2.", 2, "truncated mid-line", id="truncated-mid-line"),
    pytest.param(b'g{a="x"} 1 1.0\ng{a="x"} 2 2.0\n', 2, "no '# EOF': truncated?", id="openmetrics-without-eof"),
    pytest.param(b"g 1 1.0\n# EOF\ng 2 2.0\n", 3, "text after '# EOF'", id="sample-after-eof"),
    pytest.param(b"g 1 1.0\n# EOF\n\n", 3, "text after '# EOF'", id="blank-line-after-eof"),
    pytest.param(b"g 1 1.0\n# EOF\ng 2", 3, "text after '# EOF'", id="partial-line-after-eof"),
    pytest.param(b"\x00\x01\x02garbage\xff", 1, "not a text metrics file", id="binary-garbage"),
    pytest.param(b"g 1\nh 2\ni \x00 3\n", 3, "not a text metrics file", id="nul-byte-on-line-3"),
    pytest.param(b"g 1\nh \xff\xfe 2\n", 2, "not a text metrics file", id="invalid-utf8-on-line-2"),
    pytest.param(b'{"status": "success", "data": {}}\n', 1, "looks like JSON", id="json-object"),
    pytest.param(b"\n\n  [1, 2, 3]\n", 3, "looks like JSON", id="json-array-after-blank-lines"),
    pytest.param(b"g 1 1.0\ng 2 1.0\n# EOF\n", 2, "duplicate sample", id="duplicate-in-openmetrics"),
    pytest.param(b'g{a="b"} 1\nh 1\ng{a="b"} 2\n', 3, "duplicate sample", id="duplicate-in-a-scrape"),
    pytest.param(b'g{a="b",c="d"} 1\ng{c="d",a="b"} 2\n', 2, "duplicate sample", id="duplicate-reordered-labels"),
    pytest.param(b"g 1 2.0\nh 1 1.0\ng 2 1.0\n# EOF\n", 3, "goes backwards", id="backwards-in-openmetrics"),
    pytest.param(b"g 1 1.0\nh 2\n# EOF\n", 2, "mixing is ambiguous", id="gauge-without-timestamp"),
    pytest.param(b"g 1\nh abc\n", 2, "bad value 'abc'", id="bad-value"),
    pytest.param(b"g 1\nh 1_000\n", 2, "bad value", id="underscore-in-value"),
    pytest.param(b'g 1\nh{a="x} 1\n', 2, "unterminated value of label 'a'", id="unterminated-label-value"),
    pytest.param(b'g 1\nh{a="x",a="y"} 1\n', 2, "duplicate label 'a'", id="duplicate-label"),
    pytest.param(b"h{a=x} 1\n", 1, "expected '\"'", id="unquoted-label-value"),
    pytest.param(b"g 1\n9h 1\n", 2, "expected a metric name", id="bad-metric-name"),
    pytest.param(b"g 1 2 3\n", 1, "unexpected text after the value", id="extra-token"),
    pytest.param(b"g\n", 1, "no value", id="no-value"),
    pytest.param(b"# TYPE g speedometer\ng 1\n", 1, "valid: counter, gauge", id="unknown-type"),
    pytest.param(b"# TYPE g gauge\n# TYPE g counter\ng 1\n", 2, "declared 'counter'", id="type-conflict"),
    pytest.param(b"# HELP g only help\n\n", 2, "no sample", id="no-sample"),
    pytest.param(b"g 1 1.0 # {t=\"x\"} nope\n# EOF\n", 1, "exemplar", id="bad-exemplar"),
]


@pytest.mark.parametrize(("data", "line", "what"), BAD_INPUTS)
def test_bad_input_names_the_line_and_what_is_wrong(tmp_path: Path, data: bytes, line: int, what: str) -> None:
    path = tmp_path / "input.prom"
    path.write_bytes(data)
    with pytest.raises(RecordingParseError) as caught:
        load_source(path, scrape_time=1.0)
    assert caught.value.line == line
    assert what in caught.value.what
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert "\n" not in str(caught.value)


def test_error_quotes_are_cut_to_about_80_characters() -> None:
    data = b'g{a="' + b"x" * 5000 + b'"} nope\n'
    with pytest.raises(RecordingParseError) as caught:
        parse_scrape(data, scrape_time=1.0)
    assert len(str(caught.value)) < 400


@pytest.mark.timeout(120)  # a quadratic reader of 5 MB would not finish: the harness stops it (speed: BENCHMARKS.md)
def test_megabyte_label_value_is_read_in_linear_time() -> None:
    big = "v" * 4_000_000 + '\\"' + "w" * 1_000_000
    data = f'g{{a="{big}"}} 7\nh 1\n'.encode()
    endpoint = parse_scrape(data, scrape_time=1.0).endpoint()
    (key,) = endpoint.select("g")
    assert key.label("a") == "v" * 4_000_000 + '"' + "w" * 1_000_000
    assert endpoint.column(key)[0][0] == 7.0


@pytest.mark.timeout(120)  # a quadratic scan for the closing quote would not finish: the harness stops it
def test_megabyte_unterminated_label_value_fails_fast() -> None:
    data = b'g{a="' + b"v" * 5_000_000 + b" 1\n"
    with pytest.raises(RecordingParseError, match="unterminated"):
        parse_scrape(data, scrape_time=1.0)


def test_label_values_with_braces_commas_hashes_spaces_and_escapes_are_read() -> None:
    data = (
        b'g{a="}",b=",",c="# x",d="1 2 3",e="q\\"q",f="back\\\\",g="n\\nl"} 4\n'
        b'h{a="x 1"} 5\n'
    )
    endpoint = parse_scrape(data, scrape_time=1.0).endpoint()
    (g,) = endpoint.select("g")
    assert [g.label(k) for k in "abcdefg"] == ["}", ",", "# x", "1 2 3", 'q"q', "back\\", "n\nl"]
    (h,) = endpoint.select("h")
    assert endpoint.column(g)[0][0] == 4.0 and endpoint.column(h)[0][0] == 5.0


def test_special_floats_blank_lines_and_comments_are_read() -> None:
    data = b"# a comment\n\na NaN\nb +Inf\n\nc -Inf\nd 1.5e+09\n# HELP e help\ne -0.0\n"
    endpoint = parse_scrape(data, scrape_time=1.0).endpoint()
    value = {k.name: endpoint.column(k)[0][0] for k in endpoint.keys}
    assert math.isnan(value["a"]) and value["b"] == math.inf and value["c"] == -math.inf
    assert value["d"] == 1.5e9 and math.copysign(1, value["e"]) == -1


def test_exemplars_are_ignored_and_created_samples_kept() -> None:
    data = (
        b"# TYPE c counter\n"
        b'c_total{a="b"} 3 10.0 # {trace_id="abc"} 1.0 9.5\n'
        b'c_total{a="b"} 4 25.0 # {trace_id="d e"} 1.0\n'
        b'c_created{a="b"} 5.0 10.0\n'
        b"# EOF\n"
    )
    recording = read_openmetrics(io.BytesIO(data))
    endpoint = recording.endpoint()
    (total,) = endpoint.select("c_total")
    ts, values = endpoint.samples(total)
    assert ts.tolist() == [10.0, 25.0] and values.tolist() == [3.0, 4.0]
    (created,) = endpoint.select("c_created")
    assert endpoint.samples(created)[1].tolist() == [5.0]
    assert recording.type_of("c_created").value == "counter"


def test_prometheus_text_timestamps_are_milliseconds() -> None:
    data = b"g 1 1700000000123\ng 2 1700000015123\n"
    endpoint = parse_scrape(data, scrape_time=5.0).endpoint()
    assert endpoint.timestamps.tolist() == [1700000000.123, 1700000015.123]
    assert endpoint.select("up") == []  # a multi-scrape file brings its own up, or none


def test_openmetrics_without_any_timestamp_is_one_scrape_at_scrape_time() -> None:
    data = b"# TYPE g gauge\ng 1\n# EOF\n"
    endpoint = parse_scrape(data, scrape_time=42.0, fmt=TextFormat.OPENMETRICS).endpoint()
    assert endpoint.timestamps.tolist() == [42.0]
    assert endpoint.select("up") == []


def test_samples_keep_their_own_job_and_instance_and_others_get_the_defaults() -> None:
    data = b'g{job="a",instance="x:1"} 1 1.0\ng{job="a",instance="y:1"} 2 1.0\ng 3 1.0\n# EOF\n'
    recording = read_openmetrics(io.BytesIO(data), job="default-job", instance="here")
    assert [(e.job, e.instance) for e in recording.endpoints] == [
        ("a", "x:1"), ("a", "y:1"), ("default-job", "here")
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), openmetrics=st.booleans())
def test_arbitrary_bytes_raise_nothing_but_data_errors(data: bytes, openmetrics: bool) -> None:
    fmt = TextFormat.OPENMETRICS if openmetrics else TextFormat.PROMETHEUS
    try:
        parse_scrape(data, scrape_time=1.0, fmt=fmt)
    except DataError:
        pass


metric_like = st.lists(
    st.sampled_from(["g", "h{", "}", '"', "a=", ",", " ", "1", "NaN", " 1.5", "\n", "#", " # ", "{", "\\", "EOF", "TYPE"]),
    max_size=40,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=metric_like, openmetrics=st.booleans())
def test_near_miss_expositions_raise_nothing_but_data_errors(text: str, openmetrics: bool) -> None:
    fmt = TextFormat.OPENMETRICS if openmetrics else TextFormat.PROMETHEUS
    try:
        parse_scrape(text, scrape_time=1.0, fmt=fmt)
    except DataError:
        pass


@pytest.mark.parametrize("chunk_bytes", [7, 64, 1 << 20])
def test_line_numbers_stay_right_across_chunk_boundaries(chunk_bytes: int) -> None:
    good = "".join(f'g{{i="{i}"}} {i} 1.0\n' for i in range(200))
    data = (good + "\n" + 'h{a="x"} 1 1.0\nh{a="x"} oops 2.0\n# EOF\n').encode()
    with pytest.raises(RecordingParseError) as caught:
        read_text(io.BytesIO(data), TextFormat.OPENMETRICS, chunk_bytes=chunk_bytes)
    assert (caught.value.line, caught.value.what) == (203, "bad value 'oops'")
    duplicate = (good + 'g{i="150"} 9 1.0\n# EOF\n').encode()
    with pytest.raises(RecordingParseError, match="line 151") as caught:
        read_text(io.BytesIO(duplicate), TextFormat.OPENMETRICS, chunk_bytes=chunk_bytes)
    assert caught.value.line == 201


@settings(max_examples=100, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.binary(max_size=200).map(lambda b: b"PAR1" + b),
        st.binary(max_size=200).map(lambda b: b"\x1f\x8b\x08" + b),
        st.binary(max_size=200).map(lambda b: b"# pdcensus-record v1\n" + b),
    )
)
def test_load_source_on_arbitrary_file_bytes_raises_nothing_but_data_errors(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "input.om"
        path.write_bytes(data)
        try:
            load_source(path, scrape_time=1.0)
        except DataError:
            pass
