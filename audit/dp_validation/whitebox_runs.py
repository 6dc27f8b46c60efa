"""The runs of the Dirac-canary white-box audit (`audit.dp_validation.whitebox_audit`): the canary's
inclusion per step, one block of runs of the harness's own DP-SGD (vectorised trainer) or of a user's Opacus
setup per worker task, and every run's observations gathered from a worker pool.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.errors import AuditInputError
from audit.machinery.workers import WorkerPool, user_code

# Canary gradient norm in units of C: a correct implementation clips it to C.
CANARY_SCALE = 1000.0


# The harness's own DP-SGD: a small real table (the vectorised trainer's real clipping of real
# rows runs beside the canary) and a small MLP.
HARNESS_ROWS = 16


HARNESS_HIDDEN = (4,)


HARNESS_LR = 0.1


_STREAM_RUN, _STREAM_INCLUSION, _STREAM_HARNESS = 21, 22, 23


_IN, _OUT = 1, 0


def _run_seed(seed: int, stream: int, side: int, run: int) -> int:
    return int(np.random.SeedSequence([int(seed), stream, side, int(run)]).generate_state(1, np.uint64)[0] >> 1)


def canary_inclusions(seed: int, side: int, first_run: int, count: int, steps: int, sample_rate: float) -> np.ndarray:
    """(count, steps) bool: is the canary in step t's batch of run `first_run + i`? Never on the out side."""
    out = np.zeros((count, steps), dtype=bool)
    if side == _OUT:
        return out
    if sample_rate >= 1:
        out[:] = True
        return out
    for i in range(count):
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_INCLUSION, side, first_run + i]))
        out[i] = rng.random(steps) < sample_rate
    return out


def harness_observation_task(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    max_grad_norm: float,
    side: int,
    first_run: int,
    count: int,
    seed: int,
    canary_scale: float = CANARY_SCALE,
    device: str = "cpu",
) -> dict[str, Any]:
    """A worker task: `count` runs of the harness's DP-SGD (`train_many`) with the Dirac canary
    (side 1) or without (side 0); returns {"steps": (count, T) x_t, "final": (count,) θ_0[j] − θ_T[j]}."""
    import torch

    from targets.datasets import make_default_tabular
    from targets.vectorized_dpsgd import DPSGDSpec, train_many

    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation on a shared machine
    data = make_default_tabular(HARNESS_ROWS, int(seed))
    X = np.hstack([data.features.astype(np.float32), np.zeros((HARNESS_ROWS, 1), np.float32)])
    y = data.labels.astype(np.int64)
    d = X.shape[1]
    spec = DPSGDSpec(
        noise_multiplier=float(noise_multiplier),
        max_grad_norm=float(max_grad_norm),
        sample_rate=float(sample_rate),
        steps=int(steps),
        lr=HARNESS_LR,
    )
    include = torch.from_numpy(canary_inclusions(seed, side, first_run, count, steps, sample_rate))
    iterates = np.empty((count, steps + 1))
    value = float(canary_scale) * float(max_grad_norm)

    def hook(t: int, k0: int, params: dict[str, torch.Tensor]):
        name = next(iter(params))  # the first Linear layer's weight, (K, hidden, d)
        iterates[k0 : k0 + params[name].shape[0], t] = params[name][:, 0, d - 1].double().cpu().numpy()
        if t == steps:
            return None
        extra = {n: torch.zeros_like(p) for n, p in params.items()}
        extra[name][:, 0, d - 1] = value * include[k0 : k0 + params[name].shape[0], t].to(
            extra[name].device, extra[name].dtype
        )
        return extra

    stacked = train_many(
        d,
        HARNESS_HIDDEN,
        int(y.max()) + 1,
        X,
        y,
        np.ones((count, HARNESS_ROWS), bool),
        spec,
        seed=_run_seed(seed, _STREAM_HARNESS, side, 0),
        first_model=int(first_run),
        device=device,
        chunk_size=count,
        method="ghost",
        step_hook=hook,
    )
    expected = stacked.expected_batch_sizes.numpy().astype(float)[:, None]
    x = (iterates[:, :-1] - iterates[:, 1:]) * expected / (HARNESS_LR * float(max_grad_norm))
    return {"steps": x, "final": iterates[:, 0] - iterates[:, -1]}


def _unpack_setup(made: Any, spec: str) -> tuple[Any, Any, Any, Any, int, Any]:
    """(model, optimizer, data_loader, privacy_engine, epochs, loss) from what the factory returned."""
    if isinstance(made, dict):
        keys = ("model", "optimizer", "data_loader", "privacy_engine")
        missing = [k for k in keys if k not in made]
        if missing:
            raise AuditInputError("factory", f"{spec} returned a dict without {', '.join(missing)}")
        model, optimizer, loader, engine = (made[k] for k in keys)
        epochs, loss = made.get("epochs", 1), made.get("loss")
    elif isinstance(made, (tuple, list)) and len(made) == 4:
        (model, optimizer, loader, engine), epochs, loss = made, 1, None
    else:
        raise AuditInputError(
            "factory",
            f"{spec} must return (model, optimizer, data_loader, privacy_engine) "
            f"or a dict with those keys, got {type(made).__name__}",
        )
    for attribute in ("noise_multiplier", "max_grad_norm", "expected_batch_size", "original_optimizer"):
        if not hasattr(optimizer, attribute):
            raise AuditInputError(
                "factory",
                f"{spec}: the optimizer is not an Opacus DPOptimizer (no "
                f"{attribute}); make it private with PrivacyEngine.make_private",
            )
    if not (isinstance(epochs, int) and not isinstance(epochs, bool) and 1 <= epochs <= 10_000):
        raise AuditInputError("factory", f"{spec}: 'epochs' must be an integer in [1, 10000], got {epochs!r}")
    return model, optimizer, loader, engine, epochs, loss


def _insert_canary(optimizer, include: bool, value: float) -> None:
    """Zero coordinate j in every real per-sample gradient, then append the canary row (if `include`)."""
    import torch

    params = [p for p in optimizer.params if p.requires_grad]
    for index, p in enumerate(params):
        samples = getattr(p, "grad_sample", None)
        if not isinstance(samples, torch.Tensor):
            raise AuditInputError(
                "factory",
                "the model's parameters carry no per-sample gradients after "
                "backward(): wrap it with PrivacyEngine.make_private (GradSampleModule)",
            )
        if index == 0:
            flat = samples.reshape(samples.shape[0], -1).clone()
            flat[:, 0] = 0.0
            samples = flat.reshape(samples.shape)
        if include:
            row = torch.zeros((1, *samples.shape[1:]), dtype=samples.dtype, device=samples.device)
            if index == 0:
                row.view(-1)[0] = value
            samples = torch.cat([samples, row])
        p.grad_sample = samples


def _positive_float(value: Any, factory: str, what: str) -> float:
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise AuditInputError("factory", f"{factory}: {what} must be a finite number > 0, got {number!r}")
    return number


def _opacus_settings(optimizer, loader, engine, steps: int, delta: float) -> dict[str, Any]:
    accountant = getattr(engine, "accountant", None)
    history = [tuple(float(v) for v in h) for h in getattr(accountant, "history", []) or []]
    reported: float | None
    reported_error: str | None
    try:
        returned = engine.get_epsilon(delta)
    except Exception as exc:  # noqa: BLE001 - the user's engine; its failure is shown, not fatal
        reported = None
        reported_error = f"{type(exc).__name__}: {str(exc)[:200]}"
    else:
        # A number only: a string such as "1.0" is not coerced into the claim under audit.
        is_number = isinstance(returned, numbers.Real) and not isinstance(returned, bool)
        reported = float(returned) if is_number else None
        reported_error = None
        if reported is None or not math.isfinite(reported) or reported < 0:
            reported, reported_error = None, f"get_epsilon returned {str(returned)[:60]!r}, not an ε ≥ 0"
    sigma = float(optimizer.noise_multiplier)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise AuditInputError("factory", f"the optimizer's noise_multiplier must be a finite number ≥ 0, got {sigma!r}")
    history = [h for h in history if all(math.isfinite(v) for v in h)]
    return {
        "noise_multiplier": sigma,
        "max_grad_norm": float(optimizer.max_grad_norm),
        "expected_batch_size": int(optimizer.expected_batch_size or 0),
        "loss_reduction": str(getattr(optimizer, "loss_reduction", "mean")),
        "optimizer": type(optimizer.original_optimizer).__name__,
        "sample_rate": float(loader.sample_rate) if hasattr(loader, "sample_rate") else None,
        "poisson_sampling": type(loader).__name__ == "DPDataLoader",
        "steps": int(steps),
        "accountant": type(accountant).__name__ if accountant is not None else None,
        "accountant_history": [list(h) for h in history],
        "accountant_epsilon": reported,
        "accountant_error": reported_error,
    }


def load_factory_in_worker(factory: str | None):
    """In a worker process: quiet Opacus's harmless warnings and load the user's `factory`
    ("module:function", imported as user code: a failure is exit 2 naming it); None loads nothing."""
    import warnings

    warnings.filterwarnings("once")  # one copy of each warning per worker, not one per run
    # Opacus's per-sample hooks on a first layer whose input needs no gradient: harmless, and torch
    # repeats it at every backward() whatever the filter above says.
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    # Opacus's PRV accountant at q = 1 takes log(1 − q) = −inf on purpose (its result is right).
    warnings.filterwarnings("ignore", message="divide by zero encountered in log", module=r"opacus\.")
    if factory is None:
        return None
    from audit.machinery.user_code import load_user_function

    with user_code(f"--factory {factory}", "module"):
        return load_user_function(factory, "factory")


def opacus_observation_task(
    factory: str, side: int, first_run: int, count: int, seed: int, delta: float, canary_scale: float = CANARY_SCALE
) -> dict[str, Any]:
    """A worker task: `count` runs of the user's Opacus setup, each from a fresh `factory()` call, with
    the canary (side 1) or without (side 0). Returns {"steps": (count, T), "final": (count,),
    "settings": what the first run's optimizer, loader and engine said}."""
    import torch
    import torch.nn.functional as F

    name = f"--factory {factory}"
    function = load_factory_in_worker(factory)
    rows: list[list[float]] = []
    finals: list[float] = []
    settings: dict[str, Any] | None = None
    for i in range(count):
        run = first_run + i
        run_seed = _run_seed(seed, _STREAM_RUN, side, run)
        torch.manual_seed(run_seed)
        np.random.seed(run_seed % 2**32)
        random.seed(run_seed)
        with user_code(name):
            made = function()
        # Everything below reads the user's objects (attributes, loader, engine): all of it is the
        # user's code as far as failures go — a booby-trapped attribute is exit 2 naming the factory.
        with user_code(name, "training setup"):
            model, optimizer, loader, engine, epochs, loss = _unpack_setup(made, factory)
            params = [p for p in optimizer.params if p.requires_grad]
            if not params:
                raise AuditInputError("factory", f"{factory}: the optimizer has no trainable parameters")
            C = _positive_float(optimizer.max_grad_norm, factory, "the optimizer's max_grad_norm")
            scale = (
                _positive_float(optimizer.expected_batch_size or 1, factory, "the optimizer's expected_batch_size")
                if getattr(optimizer, "loss_reduction", "mean") == "mean"
                else 1.0
            )
            start = float(params[0].detach().reshape(-1)[0])
            observed: list[float] = []
            # The inclusion stream is drawn per step as it comes: T is only known once the loader is exhausted.
            rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_INCLUSION, side, run]))
            q_claim = float(getattr(loader, "sample_rate", 1.0))
            model.train()
            for _ in range(epochs):
                for batch in loader:
                    features, labels = batch[0], batch[1]
                    optimizer.zero_grad()
                    output = model(features)
                    value = loss(output, labels) if loss is not None else F.cross_entropy(output, labels)
                    value.backward()
                    include = side == _IN and (q_claim >= 1 or rng.random() < q_claim)
                    _insert_canary(optimizer, include, float(canary_scale) * C)
                    optimizer.step()
                    observed.append(float(params[0].grad.reshape(-1)[0]) * scale / C)
            if not observed:
                raise AuditInputError("factory", f"{factory}: the data loader yielded no batch: nothing was trained")
            if not all(math.isfinite(v) for v in observed):
                raise AuditInputError("factory", f"{factory}: the training produced NaN or infinite gradients")
            if settings is None:
                settings = _opacus_settings(optimizer, loader, engine, len(observed), delta)
            final = start - float(params[0].detach().reshape(-1)[0])
        if rows and len(observed) != len(rows[0]):
            raise AuditInputError(
                "factory",
                f"{factory}: runs took different numbers of steps "
                f"({len(rows[0])} and {len(observed)}); the audit needs a fixed T",
            )
        rows.append(observed)
        finals.append(final)
    return {"steps": np.asarray(rows, dtype=float), "final": np.asarray(finals, dtype=float), "settings": settings}


def _observations(
    pool: WorkerPool,
    function,
    before: tuple,
    after: tuple,
    kwargs: dict,
    n_runs: int,
    block: int,
    report_runs: Callable[[int, int], None] | None = None,
    *,
    first: int = 0,
    planned: int | None = None,
):
    """The observations of runs `first` … `n_runs` − 1, both sides, as blocks of `block` runs: task =
    function(*before, side, first, count, *after). `report_runs(done, total)` hears of each finished block (runs of
    both sides, counting the `first` runs per side done before, of 2·`planned` planned; default `n_runs`)."""
    tasks = [(side, start, min(block, n_runs - start)) for side in (_IN, _OUT) for start in range(first, n_runs, block)]
    done = [2 * first]
    total = 2 * (n_runs if planned is None else planned)

    def finished(index: int, _result) -> None:
        done[0] += tasks[index][2]
        if report_runs is not None:
            report_runs(done[0], total)

    results = pool.map(
        function, [(*before, side, start, count, *after) for side, start, count in tasks], kwargs, on_result=finished
    )
    sides: dict[int, list[dict]] = {_IN: [], _OUT: []}
    for (side, _, _), result in zip(tasks, results):
        sides[side].append(result)
    return sides
