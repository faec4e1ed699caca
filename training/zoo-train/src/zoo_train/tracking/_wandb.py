"""A W&B run (the optional ``zoo-train[wandb]`` extra): online, or offline with
``WANDB_MODE=offline``."""

from __future__ import annotations

import dataclasses
import pathlib
import secrets
from collections.abc import Mapping
from typing import Any

from .._provenance import kernel_label
from ._tracker import RunStart

#: Where a run directory keeps the id of its W&B run, so a resumed run continues it.
WANDB_ID_FILE = "wandb_run_id"


@dataclasses.dataclass(frozen=True)
class WandbOptions:
    """Where the W&B run goes.

    Attributes:
        project: the W&B project.
        name: the run's display name (``None``: the output directory's name).
        tags: the run's tags.
    """

    project: str = "zoo"
    name: str | None = None
    tags: tuple[str, ...] = ()


class WandbTracker:
    """Scalars, the settings as the run's config, the kernels, the sample and the loss curve,
    into a W&B run whose files live in ``out/wandb/``.

    A fresh run gets a new id, kept in ``out/wandb_run_id``; a resumed one reuses it, so W&B
    continues the same run (offline: its runs share the id, and ``wandb sync`` puts them
    together). Steps W&B already holds (an interrupted call's, redone after the checkpoint)
    are not sent again. ``keep_id=False`` (a replay) leaves the id file alone.
    """

    name = "wandb"

    def __init__(
        self, out: str | pathlib.Path, options: WandbOptions, *, keep_id: bool = True
    ) -> None:
        self.out = pathlib.Path(out).resolve()
        self.options = options
        self.keep_id = keep_id
        self._run: Any = None
        self._first_step = 0

    def start(self, run: RunStart) -> None:
        # wandb is an optional dependency (zoo-train[wandb]).
        import wandb

        mode = wandb.setup().settings.mode
        if mode == "online" and not wandb.login(verify=False, prompt=False):
            raise RuntimeError(
                "W&B has no API key; run `wandb login`, set WANDB_API_KEY, or set "
                "WANDB_MODE=offline"
            )
        config = {**run.settings, "attention_kernels": kernel_label(list(run.kernels))}
        self._run = wandb.init(
            project=self.options.project,
            name=self.options.name or self.out.name,
            tags=list(self.options.tags),
            id=self._run_id(run.resumed),
            resume=None if mode == "offline" else "allow",  # offline W&B cannot resume
            dir=str(self.out),
            config=config,
            # The process's own output stays as it is (a progress bar, other threads), and the
            # run's end adds no summary table to it.
            settings=wandb.Settings(console="off", quiet=True),
        )
        self._first_step = self._run.step

    def _run_id(self, resumed: bool) -> str:
        path = self.out / WANDB_ID_FILE
        if resumed and path.is_file():
            return path.read_text(encoding="utf-8").strip()
        run_id = secrets.token_hex(4)
        if self.keep_id:
            path.write_text(run_id + "\n", encoding="utf-8")
        return run_id

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        if step >= self._first_step:
            self._run.log(dict(values), step=step)

    def text(self, tag: str, text: str, step: int) -> None:
        # wandb is an optional dependency (zoo-train[wandb]).
        import wandb

        if step >= self._first_step:
            self._run.log({tag: wandb.Table(columns=["text"], data=[[text]])}, step=step)

    def image(self, tag: str, path: pathlib.Path, step: int) -> None:
        # wandb is an optional dependency (zoo-train[wandb]).
        import wandb

        if step >= self._first_step:
            self._run.log({tag: wandb.Image(str(path))}, step=step)

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None
