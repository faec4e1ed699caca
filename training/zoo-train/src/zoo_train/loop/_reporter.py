"""What happens as steps finish: the progress bar and the clock, and, every ``log_every`` steps,
the metrics record and the non-finite check."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .._errors import NonFiniteLossError
from .._loss import EXPERT_LOAD
from .._step_metrics import Window
from ..checkpoint import Checkpointer
from ..settings import TrainConfig
from ._progress import Progress, epochs_text


def expert_balance(rec: dict[str, Any]) -> str | None:
    """``"0.31-0.02 (even 0.125)"``: the largest share of a layer's assignments that one expert
    received, the smallest, and each one's share when even (``None`` for a dense model)."""
    prefix = f"{EXPERT_LOAD}/"
    busiest = [v for k, v in rec.items() if k.startswith(prefix + "busiest/")]
    idlest = [v for k, v in rec.items() if k.startswith(prefix + "idlest/")]
    if not busiest or not idlest:
        return None
    return f"{max(busiest):.2f}-{min(idlest):.2f} (even {rec.get(prefix + 'even', 0.0):.3g})"


class Reporter:
    """What happens as steps finish (the progress bar, the clock) and when their metrics are
    read, every ``log_every`` steps (the non-finite check, the train record)."""

    def __init__(
        self,
        config: TrainConfig,
        end: int,
        start: int,
        window: Window,
        progress: Progress,
        record: Callable[[dict[str, Any]], None],
        checkpointer: Checkpointer,
        *,
        label: str,
        skipped: int,
        extras: Callable[[int, int], dict[str, Any]] | None = None,
        rows_per_epoch: int | None = None,
    ) -> None:
        self.config, self.end, self.start, self.window = config, end, start, window
        self.progress, self.record, self.checkpointer = progress, record, checkpointer
        self.label = label
        self.skipped = skipped
        # What the data adds to a record of steps (a, b], e.g. the tokens of each source.
        self.extras = extras
        self._recorded = start
        self.rows_per_epoch = rows_per_epoch
        #: What made step ``step``'s loss non-finite, as ``(cause, fix)``, if it can be named
        #: (the batch, the parameters); ``None``: blamed on the learning rate.
        self.diagnose: Callable[[int], tuple[str, str] | None] = lambda step: None

    def epoch(self, step: int) -> float | None:
        """Passes over the training data after ``step`` steps (``None``: the data has no
        epochs)."""
        if self.rows_per_epoch is None:
            return None
        return step * self.config.batch_size * self.config.grad_accum / self.rows_per_epoch

    def due(self, step: int) -> bool:
        """Whether a train record is written after ``step``."""
        return step % self.config.log_every == 0 or step == self.end

    def finished(self, step: int, t: float) -> None:
        """Step ``step`` was seen finished at ``t`` (its metrics may not be read yet)."""
        if step == self.start + 1:
            self.window.start_clock(t)  # the first step's time is compilation, not training
        else:
            self.window.tick(t)
        self.progress.update(1)

    def __call__(self, step: int, m: dict[str, Any]) -> None:
        if not m["finite"]:
            self._nonfinite(step, m)
        self.window.add(m)
        if self.due(step):
            rec = self.window.record(step, lr=m["lr"])
            rec["skipped_total"] = self.skipped
            rec["kernel"] = self.label
            if self.extras is not None:
                rec.update(self.extras(self._recorded, step))
            self._recorded = step
            self.record(rec)
            epoch = self.epoch(step)
            shown: dict[str, float | str] = {} if epoch is None else {"epoch": epochs_text(epoch)}
            shown.update(loss=rec.get("loss", m["loss"]), lr=m["lr"])
            if "rewards/accuracies" in rec:  # preference tuning: how often the chosen side wins
                shown["acc"] = rec["rewards/accuracies"]
            if "reward" in rec:  # GRPO: the mean reward of the step's completions
                shown["reward"] = rec["reward"]
            if rec["tokens_per_s"] is not None:
                shown["tok_s"] = rec["tokens_per_s"]
            balance = expert_balance(rec)
            if balance is not None:
                shown["experts"] = balance
            self.progress.update(0, **shown)

    def _nonfinite(self, step: int, m: dict[str, Any]) -> None:
        self.skipped += 1
        bad = {"step": step, "event": "nonfinite", "loss": m["loss"], "grad_norm": m["grad_norm"]}
        if self.config.on_nonfinite == "skip":
            self.record({**bad, "action": "skip"})
            return
        self.checkpointer.wait()
        last = self.checkpointer.latest_step()
        self.record({**bad, "action": "stop"})
        what = (
            f"the update made the parameters or optimizer state non-finite (loss {m['loss']}, "
            f"gradient norm {m['grad_norm']})"
            if m.get("update_finite") is False and math.isfinite(m["loss"])
            else f"the loss is {m['loss']} (gradient norm {m['grad_norm']})"
        )
        # The learning rate is blamed only when neither the batch nor the parameters explain it.
        found = self.diagnose(step)
        cause, fix = (
            ("", "lower the learning rate or set on_nonfinite='skip'")
            if found is None
            else (f" because {found[0]}", found[1])
        )
        raise NonFiniteLossError(
            f"Step {step}: {what}{cause}; training stopped and the last good checkpoint "
            f"({'step ' + str(last) if last is not None else 'none'}) is kept; {fix}.",
            step=step,
            last_checkpoint=last,
        )
