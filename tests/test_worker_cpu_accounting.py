"""A command's workers' CPU time is counted in the command's own: the fork server that reaps them is stopped and
waited for at exit (audit/machinery/workers.py). Before, `/usr/bin/time privacy-audit run` showed 60 s of CPU for
a run that kept the machine 82 s busy, and docs/run.md quoted the smaller figure."""

import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import time
from audit.machinery.workers import run_isolated


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return time.process_time()


if __name__ == "__main__":
    print(run_isolated(spin, 1.5, name="spin", timeout=60))
"""


def test_a_workers_cpu_time_is_counted_in_the_process_that_started_it(tmp_path):
    (tmp_path / "spin.py").write_text(SCRIPT, encoding="utf-8")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "spin.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    worker_cpu = float(done.stdout.split()[-1])
    assert worker_cpu >= 1.5
    counted = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # The script's own start-up is counted too: at least the worker's busy loop must be there.
    assert counted >= 1.5, f"only {counted:.2f} s of CPU counted; the worker spent {worker_cpu:.2f} s"
