"""What a new user trips over: install names, one-line CLI errors and exit codes, honest
messages (sim, recover, convert), the Python API's first steps, and the pictures' legends."""

from __future__ import annotations

import argparse
import io
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperframes._install import DISTRIBUTION, install_hint
from hyperframes.cli import common as _cliutil
from hyperframes.cli.main import main
from hyperframes.errors import CorruptFileError
from hyperframes.synth import profile, write_synthetic

ROOT = Path(__file__).resolve().parent.parent
HF = [sys.executable, "-m", "hyperframes.cli"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("newuser") / "demo.hf"
    write_synthetic(str(path), profile("demo"), 2.0, seed=0)
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# --- 1. the install name -----------------------------------------------------------


def _text_files() -> list[Path]:
    out = []
    for top in ("hyperframes", "recorder", "converter", "docs", "scripts", "deploy", "bench"):
        out += [p for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".md", ".sh", ".toml")]
    return [*out, ROOT / "README.md", ROOT / "pyproject.toml"]


def test_no_message_names_the_other_projects_distribution() -> None:
    old = re.compile(r"(?<![\w-])hyperframes\[")  # hyperframes[viz], not hyperframes-sensors[viz]
    bad = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in _text_files()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if old.search(line)
    ]
    assert bad == []
    assert install_hint("viz") == (
        "pip install 'hyperframes-sensors[viz]' (in a checkout: scripts/setup.sh viz)"
    )
    assert f'name = "{DISTRIBUTION}"' in (ROOT / "pyproject.toml").read_text()


def test_demo_installs_every_extra_the_tour_uses() -> None:
    demo_sh = (ROOT / "scripts" / "demo.sh").read_text()
    (extras,) = re.findall(r"scripts/setup.sh (\S+)", demo_sh)
    tour = (ROOT / "README.md").read_text().split("## A 60-second tour")[1]
    needed = {"recorder": "hyperframes record", "viz": "hyperframes plot",
              "mcap": "hyperframes export", "converter": "hyperframes convert"}  # fmt: skip
    assert {e for e, cmd in needed.items() if cmd in tour} <= set(extras.split(","))


# --- 3/6. one error path: one line, the exit code of docs/CLI.md ------------------------


def _handler_raising(exc: BaseException) -> _cliutil.Handler:
    def handler(_args: argparse.Namespace) -> int:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("exc", "code", "text"),
    [
        (KeyError("f.hf: no stream 'x'; streams: ['a']"), 2, "error: f.hf: no stream 'x'; streams"),
        (IsADirectoryError(21, "Is a directory", "/tmp"), 2, "error: /tmp: is a directory (give"),
        (FileNotFoundError(2, "No such file or directory", "x.hf"), 2, "error: x.hf: no such"),
        (ValueError("--to 3 is not after --from 5"), 2, "error: --to 3 is not after --from 5"),
        (CorruptFileError("f.hf", "bad index"), 1, "error: f.hf: corrupt hyperframe file"),
        (RuntimeError("boom"), 1, "error: internal error: RuntimeError: boom (hyperframes -v"),
        (_cliutil.CommandError("nothing listens", 1), 1, "error: nothing listens"),
    ],
)
def test_run_handler_maps_errors_to_one_line_and_the_table(
    exc: BaseException, code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cliutil.run_handler(_handler_raising(exc), argparse.Namespace()) == code
    err = capsys.readouterr().err
    assert err.startswith(text) and err.count("\n") == 1


def test_run_handler_interrupt_and_closed_pipe() -> None:
    ns = argparse.Namespace()
    assert _cliutil.run_handler(_handler_raising(KeyboardInterrupt()), ns) == 130
    with pytest.raises(RuntimeError):  # -v: a bug shows its traceback
        _cliutil.run_handler(_handler_raising(RuntimeError("x")), ns, verbose=True)


@pytest.mark.parametrize(
    "args",
    [["info", "--json", "{demo}"], ["convert", "--check-config"], ["sync-report", "{demo}",
                                                                    "--ref", "imu"]],
)  # fmt: skip
def test_a_closed_pipe_ends_quietly_with_141(demo: Path, args: list[str]) -> None:
    if args[0] == "convert":
        pytest.importorskip("yaml")
    p = subprocess.Popen([*HF, *(a.format(demo=demo) for a in args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=_env())  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # like `| head` that has already exited
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and err == ""


def test_cli_mistakes_give_one_line_and_the_documented_codes(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    cases = [
        (["plot", str(demo), "--streams", "nope", "-o", str(tmp_path / "a.png")], 2,
         "no stream 'nope'; streams: ['cam_front', 'cam_rear', 'lidar_top', 'imu']"),
        (["plot", str(demo), "--sync", "nope", "-o", str(tmp_path / "b.png")], 2, "no stream"),
        (["show", str(demo), "--streams", "nope", "-o", str(tmp_path / "c.png")], 2,
         "no stream named 'nope'"),
        (["plot", str(demo), "--from", "12", "-o", str(tmp_path / "d.png")], 2,
         "--from 12: after the end of the recording, which lasts 2 s"),
        (["info", str(tmp_path)], 2, f"{tmp_path}: is a directory"),
        (["info", str(tmp_path / "none.hf")], 2, "none.hf: no such file or directory"),
        (["verify", str(tmp_path / "none.hf"), str(demo)], 2, "none.hf: does not exist"),
        (["synth", str(demo)], 2, "already exists (use --force to replace it)"),
    ]  # fmt: skip
    for argv, code, text in cases:
        assert main(argv) == code, argv
        err = capsys.readouterr().err
        assert text in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_progress_lines_only_on_a_terminal(tmp_path: Path) -> None:
    r = subprocess.run([*HF, "synth", str(tmp_path / "s.hf"), "--seconds", "1"], env=_env(),
                       capture_output=True, text=True, check=True)  # fmt: skip
    assert "\r" not in r.stderr and r.stdout.startswith("wrote ")


def test_info_takes_several_files(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["info", "--json", str(demo), str(demo)]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["path"] for d in docs] == [str(demo)] * 2
    assert main(["info", str(demo)]) == 0
    assert "0 incomplete windows" in capsys.readouterr().out


# --- 5. honest answers -----------------------------------------------------------------


def test_recover_on_a_finalized_file_writes_nothing(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = set(demo.parent.iterdir())
    assert main(["recover", str(demo)]) == 0
    assert "is finalized: nothing to recover, nothing written" in capsys.readouterr().out
    assert set(demo.parent.iterdir()) == before


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp_path: Path, port: int) -> Path:
    text = (ROOT / "configs" / "demo.yaml").read_text()
    text = re.sub(r"(?m)^output_dir:.*$", f"output_dir: {tmp_path / 'rec'}", text)
    text = text.replace("tcp://127.0.0.1:5555", f"tcp://127.0.0.1:{port}")
    cfg = tmp_path / "demo.yaml"
    cfg.write_text(text)
    return cfg


def test_record_on_an_endpoint_in_use_says_so(tmp_path: Path) -> None:
    zmq = pytest.importorskip("zmq")
    port = _free_port()
    ctx = zmq.Context()
    taken = ctx.socket(zmq.PULL)
    taken.bind(f"tcp://127.0.0.1:{port}")
    try:
        r = subprocess.run([*HF, "record", "--config", str(_config(tmp_path, port)),
                            "--seconds", "1"], env=_env(), capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    finally:
        taken.close(0)
        ctx.term()
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert f"tcp://127.0.0.1:{port}: address already in use" in last
    assert "Traceback" not in r.stderr


def test_sim_without_a_recorder_says_nothing_received_it(tmp_path: Path) -> None:
    pytest.importorskip("zmq")
    cfg = _config(tmp_path, _free_port())
    t0 = time.monotonic()
    r = subprocess.run([*HF, "sim", "--config", str(cfg), "--seconds", "0.5"], env=_env(),
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert r.returncode == 1
    assert "nothing is listening on" in r.stderr
    assert "nothing ever connected to" in r.stdout
    assert time.monotonic() - t0 < 30  # no linger waiting to flush frames to nobody
    # an unknown stream is a usage error here too (2), not a failed run (1)
    assert main(["sim", "--config", str(cfg), "--drop", "nope", "--seconds", "0.5"]) == 2


def test_convert_says_where_a_failed_input_went_and_when_a_waiting_one_is_taken(
    tmp_path: Path,
) -> None:
    pytest.importorskip("av")
    from hyperframes.converter.config import load_config
    from hyperframes.converter.directory.inbox import BatchOptions, run_batch
    from hyperframes.converter.progress import BatchDisplay

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    bad, recent = inbox / "bad.hf", inbox / "recent.hf"
    bad.write_bytes(b"\0" * 1000)
    old = time.time() - 3600
    os.utime(bad, (old, old))
    recent.write_bytes(b"\0" * 1000)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("batch: {settle_s: 60, stale_tmp_s: 7200, poll_s: 0.2, workers: 1}\n")
    opts = BatchOptions(out=tmp_path / "out", config=load_config(cfg), inbox=inbox)
    for run in range(2):
        buf = io.StringIO()
        assert run_batch(opts, display=BatchDisplay(stream=buf)) == (1 if run == 0 else 0)
        text = buf.getvalue()
        moved = inbox / "failed" / "bad.hf"
        if run == 0:  # at the time, and in the summary (a rich table, wrapped)
            assert "failed bad.hf: " in text and f"; input moved to {moved}\n" in text, text
            assert text.count("input moved to") == 2, text
        assert re.search(r"waiting recent\.hf: .*taken once 60 s old .*in \d+ s", text), text
        # the re-run converts nothing and says why
        assert "1 input(s) that failed are in" in text and "not retried" in text, text
    assert moved.exists() and recent.exists()


# --- 8. the Python API's first steps --------------------------------------------------------


def test_top_level_names_are_lazy_and_documented() -> None:
    code = (
        "import sys, hyperframes\n"
        "assert not {'hyperframes.reader', 'hyperframes.writer'} & set(sys.modules)\n"
        "from hyperframes import HyperframeReader, HyperframeWriter, decode_image, verify_file\n"
        "import hyperframes.reader\n"
        "assert HyperframeReader is hyperframes.reader.HyperframeReader\n"
        "assert 'HyperframeReader' in hyperframes.__doc__ and len(hyperframes.__doc__) > 500\n"
    )
    subprocess.run([sys.executable, "-c", code], env=_env(), check=True)


def test_window_by_name_short_reprs_and_pixels(demo: Path) -> None:
    from hyperframes import HyperframeReader

    with HyperframeReader(demo) as r:
        hf = r.get_window(3)
        cam = r.stream("cam_front").id
        assert hf["cam_front"] == hf[cam] and len(hf["cam_front"]) == 3
        with pytest.raises(KeyError, match=r"no stream named 'nope'; streams: \['cam_front'"):
            hf["nope"]
        with pytest.raises(KeyError, match="no stream id 99"):
            hf[99]
        assert len(repr(hf)) < 300 and "cam_front: 3" in repr(hf)
        frame = hf["cam_front"][0]
        assert len(repr(frame)) < 120
        rgb = frame.image()
        assert rgb.shape == (240, 320, 3) and rgb.dtype.name == "uint8"
        with pytest.raises(ValueError, match="not an image"):
            hf["imu"][0].image()
        assert len(r) == r.window_count() == sum(1 for _ in r)


def test_an_exception_inside_the_writer_block_leaves_the_tmp(tmp_path: Path) -> None:
    from hyperframes import HyperframeWriter, StreamInfo

    out = tmp_path / "seg.hf"
    with (
        pytest.raises(RuntimeError),
        HyperframeWriter(out, [StreamInfo(0, "imu", "imu", "bytes")], window_ns=100_000_000) as w,
    ):
        w.append(0, 1_000_000_000, b"x")
        raise RuntimeError("driver died")
    assert not out.exists() and (tmp_path / "seg.hf.tmp").exists()


# --- 7. pictures ------------------------------------------------------------------------------


def test_timeline_legend_lists_only_what_occurs(demo: Path) -> None:
    from hyperframes import HyperframeReader
    from hyperframes.viz.facts import facts_from_reader
    from hyperframes.viz.plot import legend_labels
    from hyperframes.viz.timeline import build_timeline

    with HyperframeReader(demo) as r:
        facts = facts_from_reader(r)
    assert legend_labels(build_timeline(facts)) == []


def test_plot_sync_follows_streams_and_range(demo: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from hyperframes import HyperframeReader
    from hyperframes.viz.plot import plot_files

    result = plot_files([demo], tmp_path / "t.png", streams=["imu", "cam_front"],
                        start="0.5", end="1", sync_ref="cam_front")  # fmt: skip
    (panel,) = result.timeline.sync
    assert panel.other == "imu"
    with HyperframeReader(demo) as r:
        ts = r.timestamps("cam_front") - r.start_ns
    in_range = int(((ts >= 500_000_000) & (ts <= 1_000_000_000)).sum())
    assert panel.matched == in_range < len(ts) // 2  # the plot's range, not the whole file
