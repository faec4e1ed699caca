"""``zoo train``: a preset model from scratch on the settings' data."""

from __future__ import annotations

import pathlib

from ..settings import RunSettings
from ._checks import check_run
from ._complete import complete_step, say_complete
from ._data import build_data
from ._epochs import steps_for_epochs
from ._finish import sample
from ._mesh import LOWER_BATCH, check_mesh_fits, check_train_positions, mesh_and_rules
from ._model import preset_config, run_tokenizer, scratch_model
from ._output import output_directory
from ._run import Job, open_trackers, run, saved_provenance, say, trained


def train_recipe(s: RunSettings) -> int:
    """Train the preset ``s.model`` into ``s.out`` (resuming what is there); returns the exit
    code."""
    from .._capacity import check_batch_fits, check_state_fits
    from ..loop import train

    check_run(s)
    out = pathlib.Path(s.out)
    done = complete_step(s)
    if done is not None:  # nothing is built, nothing in the run is touched
        say_complete(out, done, s)
        return 0
    # One training process per output directory.
    with output_directory(out), open_trackers(s, out) as trackers:
        mesh, rules = mesh_and_rules(s.mesh_text, s.sharding)
        saved = saved_provenance(out)
        tokenizer = run_tokenizer(s, out)
        config = preset_config(s, tokenizer)
        if "vocab_size" not in s.model_config and config.vocab_size != tokenizer.vocab_size:
            say(
                f"zoo: vocabulary {config.vocab_size:,}: the tokenizer's {tokenizer.vocab_size:,} "
                "ids rounded up to a multiple of 128"
            )
        check_state_fits(config, s.optimizer.name, mesh)  # before the model is built
        check_batch_fits(s.batch_size * s.grad_accum, s.seq_len, lower=LOWER_BATCH)
        check_mesh_fits(mesh, rules, config, batch_size=s.batch_size, seq_len=s.seq_len)
        check_train_positions(config, s.seq_len, settable=True)
        model = scratch_model(s, config, tokenizer, mesh, rules, resuming=bool(saved))
        with build_data(s, tokenizer) as data:
            s = steps_for_epochs(s, data.train)
            job = Job("train", s, out, mesh, rules, model, data, None, saved, trackers)
            result = run(job, train)
        if trained(result):
            sample(job, result.model, generation={}, step=result.step)
    return 0
