"""`presets`: the built-in config presets and example policies, listed, shown or written out as YAML.

A user who installed the wheel has no checkout to copy `examples/` from; this is how they get a
starting config or policy to edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from audit.cli.app import AuditApp, app, console, shown, switch
from audit.errors import AuditInputError

POLICY_FOLDER = Path(__file__).resolve().parents[1] / "policies"
_DESCRIPTIONS = {  # what each is for; how long each took lives in audit/machinery/preset_timings.py
    "smoke": "end to end, small: what CI runs",
    "default": "the main job: a leakage curve from ε = ∞ down to ε = 0.5",
    "full": "paper-grade: more data, references and ε values",
    "digits-cnn": "the image task: a small CNN on scikit-learn's 8×8 digits at ε 1, 8, ∞",
    "hospitals": "federated, record-level DP: 3 sites, local DP-SGD, MIA per site",
    "text": "language models: DP causal LMs on faker records with canaries; exposure, extraction, LM MIAs",
    "clients": "federated, client-level DP-FedAvg: 20 clients, client-level MIA",
    "llm": "DP fine-tuning of a GPT-2-style transformers model (full and LoRA) at ε 1, 8, ∞, audited in one run "
    "with Panda et al.'s and Secret Sharer canaries",
}

presets_app = AuditApp(
    help="List the built-in config presets and example policies; show one as YAML or write it to a file.",
    rich_markup_mode=None,
)
app.add_typer(
    presets_app,
    name="presets",
    short_help="List the built-in config presets and example policies; show or dump one as YAML.",
)


def _policy_files() -> dict[str, Path]:
    return {path.stem: path for path in sorted(POLICY_FOLDER.glob("*.yaml"))}


def preset_yaml(name: str) -> str:
    """The YAML of a config preset (fully resolved: every field, usable with `run --config`) or of a policy."""
    from audit.machinery.config import PRESETS, config_to_yaml, resolve_config

    policies = _policy_files()
    if name in PRESETS:
        header = f"# privacy-audit config preset '{name}', every field resolved; edit and pass with --config\n"
        return header + config_to_yaml(resolve_config(name))
    if name in policies:
        return policies[name].read_text(encoding="utf-8")
    raise AuditInputError("presets NAME", f"unknown name '{name}'; expected one of {', '.join([*PRESETS, *policies])}")


@presets_app.callback(invoke_without_command=True)
def presets_list(ctx: typer.Context) -> None:
    """List the config presets (for `run --preset`) and the example policies (for `--policy`)."""
    if ctx.invoked_subcommand is not None:
        return
    from audit.machinery.config import PRESETS

    console.print("config presets (run --preset NAME):", highlight=False)
    from audit.machinery.preset_timings import expected_time_line

    for name in PRESETS:
        console.print(f"  {name:<16} {_DESCRIPTIONS.get(name, '')}; {expected_time_line(name)}", highlight=False)
    console.print(
        "example policies (privacy-audit presets dump NAME policy.yaml, then --policy policy.yaml):", highlight=False
    )
    for name, path in _policy_files().items():
        console.print(f"  {name:<16} {_first_comment(path)}", highlight=False)
    console.print("show one: privacy-audit presets show NAME", highlight=False)


def _first_comment(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    return first.removeprefix("#").strip()


@presets_app.command("show")
def presets_show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="a preset or policy name from `presets`")],
) -> None:
    """Print a preset (resolved config) or an example policy as YAML."""
    # Plain print: the YAML must come out exactly, without rich's markup or wrapping.
    print(preset_yaml(name), end="")


@presets_app.command("dump")
def presets_dump(
    name: Annotated[str, typer.Argument(metavar="NAME", help="a preset or policy name from `presets`")],
    path: Annotated[Path, typer.Argument(metavar="FILE", help="the YAML file to write")],
    force: Annotated[bool, switch("force", "overwrite FILE if it exists")] = False,
) -> None:
    """Write a preset (resolved config) or an example policy to FILE, to edit and pass back."""
    from audit.machinery.run_directory import write_text_atomic

    text = preset_yaml(name)
    if path.exists() and not force:
        raise AuditInputError(f"FILE '{path}'", "exists; pass --force to overwrite it")
    if path.is_dir():
        raise AuditInputError(f"FILE '{path}'", "is a directory; expected a file name")
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise AuditInputError(f"FILE '{path}'", f"cannot be written ({exc.strerror})") from None
    console.print(f"wrote {shown(path)}", highlight=False)
