"""How long each preset took, measured: the one source of time estimates.

`presets` lists these figures, `run --dry-run` prints the preset's, and the docs' table
(docs/configuration.md) shows the same text, checked by tests/test_preset_timings.py. A figure is a
measurement, never a target: each names the command that produced it and the machine it ran on.
The development machine has 2 CPU cores shared with up to seven other developers' test runs, so
its wall times vary with their load (a range where it was measured more than once); CPU time, where
recorded, is what an idle 2-core machine would need at least.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MeasuredTime", "PRESET_WALL_TIMES", "duration_text", "expected_time_line"]


def duration_text(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


@dataclass(frozen=True)
class MeasuredTime:
    low_s: float  # fastest measured wall time
    high_s: float  # slowest measured wall time (= low_s when measured once)
    command: str  # what was run
    machine: str  # where, and how loaded

    def text(self) -> str:
        low, high = duration_text(self.low_s), duration_text(self.high_s)
        return low if low == high else f"{low} – {high}"


# None: not measured (say so rather than guess). "shared": the development machine, 2 CPU cores and no
# GPU, shared with up to seven other developers' test runs.
PRESET_WALL_TIMES: dict[str, MeasuredTime | None] = {
    # Wave 10: idle, after its merges (with the white-box twins; before them 18–21 s of CPU, 1 min 8 s – 2 min 52 s
    # wall on the shared machine).
    "smoke": MeasuredTime(48, 48, "privacy-audit run --preset smoke", "2 idle CPU cores; 64 s CPU, all processes"),
    # With the white-box canary twins and the conformance checks (issue 28); before them 7 min 3 s – 11 min 45 s.
    # Wave 10: idle, after its merges (docs/run.md); wave 8 7 min 49 s (902 s CPU), wave 9 8 min 12 s (940 s CPU);
    # earlier 6 min 18 s – 40 min 59 s at load 3–15.
    "default": MeasuredTime(
        434, 434, "make audit", "2 idle CPU cores; 835 s CPU, all processes; canary twins included"
    ),
    "full": None,
    "digits-cnn": MeasuredTime(443, 443, "privacy-audit run --preset digits-cnn", "2 shared CPU cores at load 13–17"),
    "hospitals": MeasuredTime(
        66, 248, "privacy-audit run --preset hospitals", "2 shared CPU cores; 60 s CPU; the slow run at load ~16"
    ),
    "clients": MeasuredTime(
        40, 179, "privacy-audit run --preset clients", "2 shared CPU cores; 38 s CPU; the slow run at load ~16"
    ),
    "text": MeasuredTime(
        461, 582, "python benchmarks/bench_text_preset.py", "2 shared CPU cores at load 8–16; 1.5 GiB peak; two runs"
    ),
    # Wave 10: idle, the adopted canaries (one new token each, secret-only loss); wave 8's design 7 min 51 s, 472 s CPU.
    "llm": MeasuredTime(522, 522, "privacy-audit run --preset llm", "2 idle CPU cores; 524 s CPU; 1.20 GiB peak"),
}


def expected_time_line(preset: str) -> str:
    """One line for `presets` and `run --dry-run`: the measured figure, or that there is none."""
    measured = PRESET_WALL_TIMES.get(preset)
    if measured is None:
        return "wall time not measured (meant for a GPU)" if preset == "full" else "wall time not measured"
    return f"measured {measured.text()} wall ({measured.machine}; `{measured.command}`)"
