"""How many Forward Pass Metrics steps per second the recorder stores, and how fast they load.

An engine publishes one FPM message per forward pass (~70-100/s per data-parallel rank at
10-15 ms decode steps); the recorder must keep up with many times that. The publisher is the
simulator's (real ZMQ PUB on 127.0.0.1), the recorder is ``record_fpm`` on a thread.

    .venv/bin/python bench/fpm_throughput.py [--steps 50000]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from pdcensus.census.fpm_ledger import fpm_ledger
from pdcensus.sim.fpm_publisher import FpmPublisher, FpmStep, scheduled_metrics
from pdcensus.sources.fpm import FpmRecord, load_fpm, record_fpm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    args = parser.parse_args()
    decode = FpmStep(0.015, scheduled_metrics((), (), (), tuple(range(1000, 1032))))
    chunk = FpmStep(0.4, scheduled_metrics((4096,), (16384,), (8192,), tuple(range(1000, 1032))))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fpm.jsonl"
        seen, stop = threading.Event(), threading.Event()
        count = [0]

        def on_record(r: FpmRecord) -> None:
            count[0] += not r.is_heartbeat
            seen.set()

        with FpmPublisher(send_high_water_mark=10 * args.steps) as pub:
            thread = threading.Thread(target=record_fpm, args=(pub.endpoint, out, 600.0),
                                      kwargs={"on_record": on_record, "stop": stop}, daemon=True)
            thread.start()
            while not seen.wait(0.01):
                pub.heartbeat()
            start = time.perf_counter()
            for i in range(args.steps):
                pub.publish(chunk if i % 50 == 0 else decode)
            while count[0] < args.steps and thread.is_alive():
                time.sleep(0.01)
            stored_seconds = time.perf_counter() - start
            stop.set()
            thread.join()
        size = out.stat().st_size
        t0 = time.perf_counter()
        records = load_fpm(out)
        load_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        overall, _ = fpm_ledger(records)
        ledger_seconds = time.perf_counter() - t0
    print(f"published and stored {count[0]} steps in {stored_seconds:.2f} s "
          f"= {count[0] / stored_seconds:,.0f} steps/s ({size / max(count[0], 1):.0f} bytes/step)")
    print(f"load_fpm {len(records)} records in {load_seconds:.2f} s; fpm_ledger in {ledger_seconds:.2f} s")
    print(f"ledger: decode-only {overall.decode_step_mean_seconds * 1000:.1f} ms, "
          f"chunk {overall.chunk_step_mean_seconds * 1000:.1f} ms, gaps {overall.sequence_gaps}")


if __name__ == "__main__":
    main()
