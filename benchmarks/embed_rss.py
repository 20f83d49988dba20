"""Resident memory an embedding call leaves behind, by how much text one call holds.

    python -m benchmarks.embed_rss [--texts 64,256] [--groups 0,8]

Each row is a fresh process with the default embedder (the packaged MiniLM's ONNX
build): it embeds ``texts`` texts of the 32,000-character maximum, in calls of
``group`` texts (0: one call), and reports its resident memory before and after and
its peak. The tokenizer works on a whole call's text at once and the process keeps
that memory afterwards, which is why online writes embed in groups
(``mnemoray.memory.service.service.EMBED_GROUP_CHARS``). Prints a table and writes
``benchmarks/results/embed_rss.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script
from benchmarks.machine import machine  # noqa: E402

RESULTS = HERE / "results" / "embed_rss.json"
CHARS = 32_000


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def _child(texts: int, group: int) -> dict[str, Any]:
    import random
    import resource
    import time

    from mnemoray.embedders import open_embedder

    embedder = open_embedder("default")
    rnd = random.Random(0)
    words = ("parrot", "Madrid", "marathon", "sourdough", "violin", "Kyoto", "chess")
    batch = [
        " ".join(f"{rnd.choice(words)}{rnd.randint(0, 9999)}" for _ in range(CHARS // 6))[:CHARS]
        for _ in range(texts)
    ]
    embedder.encode(["warm up"])
    before = _rss_mib()
    step = group or texts
    t0 = time.perf_counter()
    for i in range(0, texts, step):
        embedder.encode(batch[i : i + step])
    return {
        "texts": texts,
        "group": group,
        "seconds": round(time.perf_counter() - t0, 1),
        "rss_before_mib": round(before, 1),
        "rss_after_mib": round(_rss_mib(), 1),
        "peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", default="64,256")
    p.add_argument("--groups", default="0,8", help="texts per call; 0: all in one call")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    rows = []
    for texts in (int(x) for x in args.texts.split(",")):
        for group in (int(x) for x in args.groups.split(",")):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.embed_rss", "--child", str(texts), str(group)],
                cwd=HERE.parent,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(
                f"{r['texts']:>5} texts x {CHARS} chars, "
                f"{'one call' if not group else f'{group} per call':>12}: RSS "
                f"{r['rss_before_mib']} -> {r['rss_after_mib']} MiB "
                f"(+{r['rss_after_mib'] - r['rss_before_mib']:.0f}), peak {r['peak_mib']} MiB, "
                f"{r['seconds']} s",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
