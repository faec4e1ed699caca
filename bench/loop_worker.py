"""Worker for the loop-overhead benchmark (``python -m bench.loop_worker``).

Config (JSON argv[1]): ``model`` (zoo_models.ModelConfig changes on llama-tiny), ``batch``,
``seq_len``, ``chunk`` (steps per timed chunk). Requests:
``{"op": "loop", "chunks": k}`` -> zoo_train.train over ``1 + k`` chunks of steps, with the
progress bar, metrics, the default trackers (TensorBoard event files, written from their
thread) and a final checkpoint, as ``zoo train`` runs it; the step times of its metric records
after the first chunk (compilation) -> ``{"step_s": [...]}``.
``{"op": "bare", "chunks": k}`` -> the same compiled step called in a plain Python loop on
batches already on the device -> ``{"step_s": [...]}``, one per chunk.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from typing import Any

import numpy as np

from .harness import serve


def make_mesh_and_rules(config: Any) -> tuple[Any, Any]:
    """The mesh and sharding rules train() uses for ``config``."""
    from zoo_train.parallel import make_mesh, make_rules

    return make_mesh(config.mesh), make_rules(config.sharding)


# The trackers `zoo train` writes to by default.
TRACKERS = ("jsonl", "tensorboard")


class LoopBench:
    """The model, data and config shared by both sides."""

    def __init__(self, config: dict[str, Any]) -> None:
        import jax

        import zoo_models
        import zoo_train
        from zoo_train.data import PackedLoader

        self.chunk = int(config["chunk"])
        self.model_config = zoo_models.get("llama-tiny").replace(
            **config["model"], dropout=0.0, bos_token_id=None, eos_token_id=None
        )
        rng = np.random.default_rng(0)
        vocab = self.model_config.vocab_size
        docs = [rng.integers(1, vocab, int(n)) for n in rng.integers(50, 400, 4000)]
        self.seq_len = int(config["seq_len"])
        self.loader = lambda: PackedLoader(docs, seq_len=self.seq_len, seed=0)
        self.batch = int(config["batch"])
        self.model = lambda: zoo_models.build(self.model_config, key=jax.random.key(0))
        self.zoo_train = zoo_train

    def config(self, steps: int) -> Any:
        return self.zoo_train.TrainConfig(
            steps=steps,
            batch_size=self.batch,
            log_every=self.chunk,
            eval_every=0,
            checkpoint_every=steps,
            keep=1,
            plot=False,
            progress=True,
        )

    def loop(self, chunks: int) -> dict[str, Any]:
        from zoo_train.tracking import open_trackers

        steps = self.chunk * (chunks + 1)
        records: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as out, open_trackers(TRACKERS, out) as trackers:

            def on_record(rec: dict[str, Any]) -> None:
                records.append(rec)
                trackers.record(rec)

            trainer = self.zoo_train.Trainer(self.config(steps), self.model(), None, out)
            trainer.train(self.loader(), on_record=on_record)
        tokens_per_step = self.batch * self.seq_len
        timed = [r for r in records if r.get("tokens_per_s") and "event" not in r]
        # The first record's window holds the compilation (the loop leaves its first step out,
        # but the window is shorter); the rest are steady state.
        return {"step_s": [tokens_per_step / r["tokens_per_s"] for r in timed[1:]]}

    def bare(self, chunks: int) -> dict[str, Any]:
        import jax

        zoo_train = self.zoo_train
        from zoo_train.parallel import BatchLayout, batch_reader, init_sharded, platform_of

        config = self.config(self.chunk * (chunks + 1))
        mesh, rules = make_mesh_and_rules(config)
        plan = zoo_train.plan_state(self.model, config, mesh, rules)
        state = init_sharded(lambda: plan.fresh(self.model()), mesh=mesh, shardings=plan.shardings)
        # The loss and the program train() builds for this config: metrics packed in one vector.
        dtype = zoo_train.resolve_compute_dtype(config.compute_dtype, platform_of(mesh))
        loss = zoo_train.make_lm_loss(z_loss=config.z_loss, compute_dtype=dtype)
        step = zoo_train.make_train_step(
            plan.optimizer, loss, plan.schedule, mesh=mesh, rules=rules, packed_metrics=True
        )
        read = batch_reader(self.loader(), BatchLayout(mesh, rules, self.batch))
        batches = [read() for _ in range(8)]  # made and placed before any timing
        state, metrics = step(batches[0], state)  # compiles
        jax.block_until_ready((state, metrics))
        times = []
        for c in range(chunks):
            t0 = time.perf_counter()
            for i in range(self.chunk):
                state, metrics = step(batches[(c * self.chunk + i) % len(batches)], state)
            jax.block_until_ready((state, metrics))
            times.append((time.perf_counter() - t0) / self.chunk)
        return {"step_s": times}

    def host(self, steps: int) -> dict[str, Any]:
        """Host time per step of the work the loop adds to a bare loop, with no device work
        in between (so no noise from it): making and placing a batch (the prefetch thread's
        job), and the metrics path (wait for a finished step, reads at records, progress bar,
        records handed to the trackers) on metrics that are ready."""
        import jax.numpy as jnp

        from zoo_train import PackedMetrics, StepMetrics, Window
        from zoo_train.loop import Progress, Reporter
        from zoo_train.parallel import BatchLayout, batch_reader
        from zoo_train.profile import step_annotation
        from zoo_train.tracking import open_trackers

        config = self.config(steps)
        read = batch_reader(self.loader(), BatchLayout(*make_mesh_and_rules(config), self.batch))
        read()
        t0 = time.perf_counter()
        for _ in range(steps):
            read()
        batch_s = (time.perf_counter() - t0) / steps
        names = ("ce", "finite", "grad_norm", "loss", "lr", "update_finite", "weight")
        rng = np.random.default_rng(0)
        values = rng.random((steps, len(names)))
        values[:, [names.index("finite"), names.index("update_finite")]] = 1.0
        metrics = [PackedMetrics(jnp.asarray(v, jnp.float32), names) for v in values]
        progress = Progress(steps, 0, enabled=True)
        records: list[str] = []
        with tempfile.TemporaryDirectory() as out, open_trackers(TRACKERS, out) as trackers:

            def record(rec: dict[str, Any]) -> None:
                records.append(json.dumps(rec))
                trackers.record(rec)

            # The loop's own reporter (clock, progress bar, records); its checkpointer is only
            # asked about a non-finite step, and these are all finite.
            reporter = Reporter(
                config, steps, 0, Window(self.batch * self.seq_len), progress, record,
                None,  # type: ignore[arg-type]  # the checkpointer, never asked (see above)
                label="bench", skipped=0,
            )  # fmt: skip
            reader = StepMetrics(reporter, on_ready=reporter.finished, due=reporter.due)
            t0 = time.perf_counter()
            for step, m in enumerate(metrics, start=1):
                with step_annotation(step):
                    pass
                reader.push(step, m)
            reader.drain()
            metrics_s = (time.perf_counter() - t0) / steps
        progress.close()
        return {"batch_s": batch_s, "metrics_s": metrics_s}


def main() -> None:
    config = json.loads(sys.argv[1])
    bench = LoopBench(config)
    serve(
        {
            "loop": lambda r: bench.loop(int(r["chunks"])),
            "bare": lambda r: bench.bare(int(r["chunks"])),
            "host": lambda r: bench.host(int(r["steps"])),
        },
        {"params": None},
    )


if __name__ == "__main__":
    main()
