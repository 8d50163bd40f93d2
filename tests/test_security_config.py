"""Issue 24 items 4 and 6: hostile YAML and secrets in the recorder and converter configs.

Each hostile file goes through the real loaders (``hyperframes check-config``'s
and ``convert --config``'s); the error must be one short line, and loading all
of them in one process must raise its peak RSS by less than 100 MB, where the
old loader took 640 MB for one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hyperframes.converter.config import load_config as load_convert
from hyperframes.errors import ConfigError
from hyperframes.recorder.config import check_config_main
from hyperframes.recorder.config import load_config as load_vehicle

HEAD = """\
output_dir: ./out
window_ms: 100
segment_seconds: 10
zmq: {{endpoint: "ipc:///tmp/x.sock", socket: pull, bind: true}}
streams:
  - {{extra: {{laughs: {laughs}{extra}}}, id: 0, name: imu, kind: {kind}, encoding: imu-f64,
     topic: imu, rate_hz: 100}}
vehicle_id: {vid}
"""
LAUGHS = (
    "{"
    + ", ".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" if i else 'l0: &l0 "lol"' for i in range(9)
    )
    + "}"
)  # 9^8 strings once walked as a tree; shared objects as PyYAML builds them


def vehicle(vid: str = "car", kind: str = "imu", extra: str = "", laughs: str = "0") -> str:
    return HEAD.format(vid=vid, kind=kind, extra=extra, laughs=laughs)


def one_line(load: Callable[[Path], object], path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load(path)
    text = str(err.value)
    assert "\n" not in text and len(text) < 600, text[:2000]
    return text


CASES = {
    "laughs-in-vehicle-id": (vehicle(vid="*l8", laughs=LAUGHS), "aliases"),
    "laughs-in-kind": (vehicle(kind="*l8", laughs=LAUGHS), "aliases"),
    "laughs-in-extra": (vehicle(laughs=LAUGHS), "aliases"),
    "deep-nesting": (vehicle(extra=", x: " + "[" * 5000 + "]" * 5000), "nested"),
    "a-16-MB-file": (vehicle(vid="a" * (16 << 20)), "larger than"),
    "a-long-value": (vehicle(vid="b" * (250 << 10)), "characters"),
}
CONVERT_CASES = {
    "laughs": (f"batch: {LAUGHS}\nvideo: {{x265_preset: *l8}}\n", "aliases"),
    "deep": ("video: " + "[" * 5000 + "\n", "nested"),
}

_RSS = """
import json, resource, sys
from hyperframes.converter.config import load_config as c
from hyperframes.recorder.config import load_config as v
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
base = rss()
for load, path in json.loads(sys.argv[1]):
    try:
        (v if load == "v" else c)(path)
    except Exception:
        pass
print((rss() - base) * 1024)
"""


def test_refusing_every_hostile_file_stays_under_100_MB(tmp_path: Path) -> None:
    jobs = []
    for load, cases in (("v", CASES), ("c", CONVERT_CASES)):
        for case, (text, _) in cases.items():
            path = tmp_path / f"{load}-{case}.yaml"
            path.write_text(text)
            jobs.append((load, str(path)))
    r = subprocess.run([sys.executable, "-c", _RSS, json.dumps(jobs)], capture_output=True,
                       text=True, timeout=120, check=True)  # fmt: skip
    assert int(r.stdout) < 100 << 20, f"peak RSS grew by {int(r.stdout) / 2**20:.0f} MB"


@pytest.mark.parametrize("case", CASES)
def test_hostile_vehicle_yaml_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    text, expect = CASES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    assert expect in one_line(load_vehicle, path)


@pytest.mark.parametrize("case", CONVERT_CASES)
def test_hostile_convert_yaml_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    text, expect = CONVERT_CASES[case]
    path = tmp_path / "convert.yaml"
    path.write_text(text)
    assert expect in one_line(load_convert, path)


def test_python_tags_stay_refused(tmp_path: Path) -> None:
    path = tmp_path / "tag.yaml"
    path.write_text(vehicle(vid="!!python/object/apply:os.system [echo hi]"))
    assert "python/object" in one_line(load_vehicle, path)


SECRET = "84736251"


@pytest.mark.parametrize(
    "mqtt",
    [
        f"mqtt: {{host: b, username: u, password: {SECRET}}}\n",  # a number, not a string
        f"mqtt: {{host: b, username: u, password: [{SECRET}]}}\n",
        f'mqtt: {{host: b, username: u, password: "{SECRET}}}\n',  # unterminated: a YAML error
        f"mqtt: {{host: b, username: u, password: {SECRET}, passwd: x}}\n",  # an unknown key
    ],
)
def test_an_inline_password_is_never_echoed(
    tmp_path: Path, mqtt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pw.yaml"
    path.write_text(vehicle() + mqtt)
    assert check_config_main([str(path)]) == 2
    out = capsys.readouterr()
    assert out.err.startswith("error: ") and SECRET not in out.out + out.err
    assert len(out.err.strip().splitlines()) == 1
