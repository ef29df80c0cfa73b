"""Seeded run-to-run noise of the sample JIT's metrics and the sample pintool's counts.

Off by default.  A JIT file (its spec's ``noise``) or the pintool file (a JSON line after
its magic) can name metrics with a relative amplitude in percent, e.g.
``{"instructions": 0.05}`` or ``{"BytesAllocated": 5}``.  Each compile's value is then
multiplied by ``1 + pct/100 * u`` with ``u`` in [-1, 1], drawn from

    (noise seed, run key, JIT slot 1 or 2, metric, method hash)

so the two sides of one ``-applyDiff`` run differ even for the same JIT file, two runs
of the same JIT differ, and the same (seed, run key) always gives the same values.

The run key is what makes two runs differ reproducibly: ``SPMI_SAMPLE_NOISE_RUN`` when
it is set (a test pins a run that way); otherwise the top-level superpmi takes the next
number of a per-toolchain counter folder (``noise_runs`` in the noise config: a file
``<N>`` created exclusively, so concurrent runs get distinct numbers) and exports it in
``SPMI_SAMPLE_NOISE_RUN`` so that its parallel workers (``-p``) share it.  A fresh
toolchain replaying the same commands in the same order therefore sees the same noise.
When the folder cannot be written the key is the process id (noisy, not reproducible).
"""
from __future__ import annotations

import os

from .model import METRIC_NAMES, mix, string_seed
from .plain import FrozenRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterable, Mapping, Optional, Tuple

NOISE_RUN_ENV = "SPMI_SAMPLE_NOISE_RUN"
INSTRUCTIONS = "instructions"
#: metrics a noise knob may name: the reported metrics and PIN's instruction count
NOISY_METRICS = tuple(METRIC_NAMES) + (INSTRUCTIONS,)
_RESOLUTION = 1000000


class NoiseConfig(FrozenRecord):
    """Amplitudes (metric -> percent), the seed and the run counter folder."""

    __slots__ = ("amplitudes", "seed", "runs_dir")
    amplitudes: Mapping[str, float]
    seed: int
    runs_dir: str

    def __init__(self, amplitudes: Optional[Mapping[str, float]] = None, seed: int = 0, runs_dir: str = "") -> None:
        self._init({} if amplitudes is None else amplitudes, seed, runs_dir)

    @property
    def enabled(self) -> bool:
        return any(value > 0 for value in self.amplitudes.values())

    def to_json(self) -> Dict[str, object]:
        return {"noise": dict(self.amplitudes), "noise_seed": self.seed, "noise_runs": self.runs_dir}


def config_from(data: Mapping[str, object]) -> NoiseConfig:
    """The noise fields of a JIT spec or pintool config (absent: no noise)."""
    amplitudes = data.get("noise") or {}
    seed = data.get("noise_seed") or 0
    if not isinstance(amplitudes, dict) or not isinstance(seed, int):
        return NoiseConfig()
    return NoiseConfig({str(k): float(v) for k, v in amplitudes.items()}, seed, str(data.get("noise_runs") or ""))


def check_amplitudes(amplitudes: Mapping[str, float]) -> None:
    """ValueError naming a metric the sample does not report, or a negative amplitude."""
    for metric, pct in amplitudes.items():
        if metric not in NOISY_METRICS:
            raise ValueError("noise metric '%s' is not one the sample reports (choose from %s)"
                             % (metric, ", ".join(NOISY_METRICS)))
        if not pct >= 0:
            raise ValueError("noise amplitude of %s must be a percentage >= 0, not %r" % (metric, pct))


def factor(config: NoiseConfig, run_key: str, slot: int, metric: str, method_hash: int) -> float:
    """The multiplier of one compile's value (1.0 when the metric is not noisy)."""
    pct = float(config.amplitudes.get(metric, 0.0))
    if pct <= 0:
        return 1.0
    draw = mix(config.seed, string_seed(run_key), slot, string_seed(metric), method_hash)
    unit = (draw % (2 * _RESOLUTION + 1) - _RESOLUTION) / float(_RESOLUTION)
    return 1.0 + pct / 100.0 * unit


def apply(value: object, multiplier: float) -> object:
    """``value`` scaled, keeping its type (ints rounded, doubles to 2 decimals)."""
    if multiplier == 1.0:
        return value
    if isinstance(value, float):
        return round(value * multiplier, 2)
    if isinstance(value, int):
        return int(round(value * multiplier))
    return value


def noisy_metrics(config: NoiseConfig, run_key: str, slot: int, method_hash: int,
                  names: Iterable[str], values: Tuple[object, ...]) -> Tuple[object, ...]:
    """Reported metric values (in ``names`` order) with the configured noise applied."""
    if not config.enabled:
        return values
    return tuple(apply(value, factor(config, run_key, slot, name, method_hash))
                 for name, value in zip(names, values))


def current_run_key() -> str:
    return os.environ.get(NOISE_RUN_ENV, "") or "0"


def allocate_run_key(runs_dir: str) -> str:
    """The next run number of ``runs_dir`` (created exclusively), or the process id."""
    try:
        os.makedirs(runs_dir, exist_ok=True)
        number = len(os.listdir(runs_dir)) + 1
        while True:
            try:
                handle = os.open(os.path.join(runs_dir, str(number)), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                number += 1
                continue
            os.close(handle)
            return str(number)
    except OSError:
        return "pid-%d" % os.getpid()


def prepare_run(configs: Iterable[NoiseConfig]) -> Optional[str]:
    """Called once by the top-level superpmi: fix the run key for this process and its workers."""
    if os.environ.get(NOISE_RUN_ENV):
        return os.environ[NOISE_RUN_ENV]
    for config in configs:
        if config.enabled:
            key = allocate_run_key(config.runs_dir) if config.runs_dir else "pid-%d" % os.getpid()
            os.environ[NOISE_RUN_ENV] = key
            return key
    return None


def read_pintool_config(path: Optional[str]) -> NoiseConfig:
    """The noise config a sample pintool file carries (its JSON line), or none."""
    if not path:
        return NoiseConfig()
    try:
        with open(path, "rb") as stream:
            lines = stream.read().splitlines()
    except OSError:
        return NoiseConfig()
    for line in lines[1:]:
        if line.startswith(b"{"):
            import json

            try:
                data = json.loads(line.decode("utf-8"))
            except ValueError:
                return NoiseConfig()
            return config_from(data) if isinstance(data, dict) else NoiseConfig()
    return NoiseConfig()
