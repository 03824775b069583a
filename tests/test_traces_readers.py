"""Trace readers: the real files in ../shared/traces, and small files (good and malformed) made here."""

from __future__ import annotations

import gzip
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.traces.readers import DatetimeClock, TraceFile, TraceReader
from tests.conftest import SHARED

AZURE = SHARED / "traces" / "azure2023"
CODE = AZURE / "AzureLLMInferenceTrace_code.csv"
CONV = AZURE / "AzureLLMInferenceTrace_conv.csv"
MOONCAKE = SHARED / "traces" / "mooncake" / "synthetic_trace.jsonl"


def rows(path, fmt, **options):
    return list(TraceReader(TraceFile(str(path), fmt, **options)))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("path", "count"), [(CODE, 8_819), (CONV, 19_366)])
def test_azure_2023_files_have_their_published_counts(path, count):
    got = rows(path, "azure")
    assert len(got) == count
    times = np.array([r.time_s for r in got])
    assert times[0] == 0.0
    assert (np.diff(times) >= 0).all()
    expected = pd.read_csv(path)
    stamps = pd.to_datetime(expected["TIMESTAMP"])
    span = (stamps.iloc[-1] - stamps.iloc[0]).total_seconds()
    assert times[-1] == pytest.approx(span, abs=1e-6)
    assert [r.prompt_tokens for r in got] == expected["ContextTokens"].tolist()
    assert [r.output_tokens for r in got] == expected["GeneratedTokens"].tolist()


def test_azure_seven_fractional_digits_are_kept():
    first, second = rows(CONV, "azure")[:2]
    # 2023-11-16 18:15:46.6805900 → 18:15:50.9951690
    assert second.time_s - first.time_s == pytest.approx(4.314579, abs=1e-9)
    assert (first.prompt_tokens, first.output_tokens) == (374, 44)
    assert first.line == 2


def test_azure_2024_style_with_utc_offsets(tmp_path):
    path = write(tmp_path, "azure2024.csv",
                 "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2024-05-10 23:59:59.500000+00:00,100,10\n"
                 "2024-05-11 00:00:01.250000+00:00,200,20\n"
                 "2024-05-11 02:00:02.250000+02:00,300,30\n")
    got = rows(path, "azure")
    assert [r.time_s for r in got] == pytest.approx([0.0, 1.75, 2.75])


def test_datetime_clock_accepts_iso_forms():
    clock = DatetimeClock()
    assert clock.seconds("2023-11-16T00:00:00Z") == 0.0
    assert clock.seconds("2023-11-17 00:00:00.1234567") == pytest.approx(86400.1234567, abs=1e-9)
    assert clock.seconds("2023-11-16 01:00:00-01:00") == pytest.approx(7200.0)


def test_mooncake_jsonl():
    got = rows(MOONCAKE, "mooncake")
    assert len(got) == 3_993
    with MOONCAKE.open() as handle:
        last = json.loads(handle.readlines()[-1])
    assert got[-1].time_s == pytest.approx(last["timestamp"] / 1000.0)
    assert (got[-1].prompt_tokens, got[-1].output_tokens) == (last["input_length"], last["output_length"])


BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,1087,0,1087,Conversation log\n"
    "118,GPT-4,417,276,693,Conversation log\n"
    "120,ChatGPT,1360,0,1360,API log\n"
    "130.5,ChatGPT,100,12,112,API log\n"
)


def test_burstgpt_skips_and_counts_failed_requests(tmp_path):
    reader = TraceReader(TraceFile(str(write(tmp_path, "burst.csv", BURSTGPT)), "burstgpt"))
    got = list(reader)
    assert [r.time_s for r in got] == [0.0, 113.0, 125.5]
    assert [r.output_tokens for r in got] == [18, 276, 12]
    assert reader.failed_requests == 2
    assert reader.bad_lines == 0


def test_generic_csv_with_a_column_mapping(tmp_path):
    path = write(tmp_path, "mine.tsv", "arrival_ms\tin\tout\ttask\n1000\t10\t5\tcode\n1250\t20\t6\tchat\n")
    columns = (("domain", "task"), ("output_tokens", "out"), ("prompt_tokens", "in"), ("timestamp", "arrival_ms"))
    got = rows(path, "csv", columns=columns, time_unit="ms", delimiter="\t")
    assert [(r.time_s, r.prompt_tokens, r.output_tokens, r.domain) for r in got] == [
        (0.0, 10, 5, "code"), (0.25, 20, 6, "chat")]


def test_gzipped_files_stream_too(tmp_path):
    path = tmp_path / "trace.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(BURSTGPT)
    assert len(rows(path, "burstgpt")) == 3


MALFORMED = [
    ("2023-11-16 18:00:01.0,12,\n", "3", "fields|not a number"),
    ("2023-11-16 18:00:01.0,twelve,3\n", "3", "not a number"),
    ("2023-11-16 18:00:01.0,-5,3\n", "3", "whole number"),
    ("2023-11-16 17:00:00.0,12,3\n", "3", "backwards"),
    ("yesterday,12,3\n", "3", "timestamp"),
]


@pytest.mark.parametrize(("line", "number", "reason"), MALFORMED)
def test_a_malformed_line_names_file_and_line(tmp_path, line, number, reason):
    path = write(tmp_path, "bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:00:00.0,10,2\n" + line + "2023-11-16 18:00:02.0,11,2\n")
    with pytest.raises(SpecplanError, match=rf"bad\.csv:{number}: malformed azure line \(.*({reason})"):
        rows(path, "azure")
    reader = TraceReader(TraceFile(str(path), "azure", skip_bad_lines=True))
    assert len(list(reader)) == 2
    assert reader.bad_lines == 1


def test_malformed_json_line(tmp_path):
    path = write(tmp_path, "bad.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
                 '{"timestamp": 10, "input_length": 5}\n{not json}\n')
    with pytest.raises(SpecplanError, match=r"bad\.jsonl:2: .*no 'output_length'"):
        rows(path, "mooncake")
    reader = TraceReader(TraceFile(str(path), "mooncake", skip_bad_lines=True))
    assert len(list(reader)) == 1
    assert reader.bad_lines == 2


def test_missing_column_and_missing_file_are_one_line_errors(tmp_path):
    path = write(tmp_path, "x.csv", "time,ContextTokens,GeneratedTokens\n1,2,3\n")
    with pytest.raises(SpecplanError, match=r"no column 'TIMESTAMP'.*columns: time, ContextTokens"):
        rows(path, "azure")
    with pytest.raises(SpecplanError, match="cannot read trace"):
        rows(tmp_path / "absent.csv", "azure")


def test_reading_is_lazy(tmp_path):
    """Taking the first rows never parses the rest: a bad line far down is not reached."""
    body = "".join(f"{i},{i % 50 + 1},{i % 7 + 1}\n" for i in range(100_000))
    path = write(tmp_path, "long.csv", "timestamp,prompt_tokens,output_tokens\n" + body + "oops,1,1\n")
    reader = TraceReader(TraceFile(str(path), "csv"))
    first = list(itertools.islice(reader, 10))
    assert [r.time_s for r in first] == list(map(float, range(10)))
    with pytest.raises(SpecplanError, match=r"long\.csv:100002:"):
        list(reader)
