#!/usr/bin/env bash
# Installs hyperframes with what the README's tour uses (recorder, viz, mcap, converter, catalog),
# then records 6 s of simulated sensor traffic over loopback ZeroMQ (configs/demo.yaml:
# 2 cameras, a lidar, an IMU), and shows what was recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh recorder,viz,mcap,converter,catalog
hf=.venv/bin/hyperframes
out=$(mktemp -d "${TMPDIR:-/tmp}/hyperframes-demo.XXXXXX")
sed "s|^output_dir:.*|output_dir: $out|" configs/demo.yaml > "$out/demo.yaml"

echo "== recording to $out (recorder + simulator, 6 s)"
"$hf" record --config "$out/demo.yaml" --seconds 8 &
recorder=$!
sleep 1.5
"$hf" sim --config "$out/demo.yaml" --seconds 6
wait "$recorder"

echo "== what was recorded"
for f in "$out"/*.hf; do "$hf" info "$f"; done
"$hf" verify "$out"/*.hf
echo "== one hyperframe, read back with the library"
.venv/bin/python - "$out" <<'PY'
import glob, sys
from hyperframes.reader import HyperframeReader

path = sorted(glob.glob(sys.argv[1] + "/*.hf"))[0]
with HyperframeReader(path) as r:
    hf = r.get_window(r.window_count() // 2)
    print(f"window {hf.window_id} ({hf.start_ns} .. {hf.end_ns}]:")
    for sid, frames in sorted(hf.frames.items()):
        s = r.streams[sid]
        print(f"  {s.name:<10} {len(frames)} frames, first {frames[0].data.nbytes} bytes"
              + (f", array {frames[0].array().shape}" if s.dtype else ""))
PY
