"""``zoo train``: a preset model trained from scratch on the settings' data."""

from __future__ import annotations

import pathlib

from ..loop import Trainer
from ..settings import RunSettings
from . import _steps as steps


def train(s: RunSettings) -> int:
    """Train the preset ``s.model`` into ``s.out`` (resuming what is there); returns the exit
    code."""
    from .._capacity import check_batch_fits, check_state_fits

    steps.check_run(s)
    if steps.already_complete(s):  # nothing is built, nothing in the run is touched
        return 0
    out = pathlib.Path(s.out)
    # One training process per output directory.
    with steps.output_directory(out), steps.open_trackers(s, out) as trackers:
        mesh, rules = steps.mesh_and_rules(s.mesh_text, s.sharding)
        saved = steps.saved_provenance(out)
        tokenizer = steps.run_tokenizer(s, out)
        config = steps.preset_config(s, tokenizer)
        if "vocab_size" not in s.model_config and config.vocab_size != tokenizer.vocab_size:
            steps.say(
                f"zoo: vocabulary {config.vocab_size:,}: the tokenizer's {tokenizer.vocab_size:,} "
                "ids rounded up to a multiple of 128"
            )
        check_state_fits(config, s.optimizer.name, mesh)  # before the model is built
        check_batch_fits(s.batch_size * s.grad_accum, s.seq_len, lower=steps.LOWER_BATCH)
        steps.check_mesh_fits(mesh, rules, config, batch_size=s.batch_size, seq_len=s.seq_len)
        steps.check_train_positions(config, s.seq_len, settable=True)
        model = steps.scratch_model(s, config, tokenizer, mesh, rules, resuming=bool(saved))
        with steps.build_data(s, tokenizer) as data:
            s = steps.epochs_as_steps(s, data.train)
            info = steps.run_info(model, preset=s.model)
            trainer = Trainer(s.train_config(), model.model, None, out, mesh=mesh, run_info=info)
            result = steps.train_and_report(trainer, s, "train", model, data, None, saved, trackers)
        if steps.trained(result):
            steps.sample(s, trainer, tokenizer, result.model, result.step, {}, trackers)
    return 0
