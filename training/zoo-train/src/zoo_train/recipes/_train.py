"""``zoo train``: a preset model from scratch on the settings' data."""

from __future__ import annotations

import pathlib

from ..checkpoint import run_lock
from ..parallel import is_primary
from ..settings import RunSettings
from ._checks import check_run
from ._data import build_data
from ._finish import sample
from ._mesh import check_mesh_fits, check_positions, mesh_and_rules
from ._model import preset_config, run_tokenizer, scratch_model
from ._run import Job, run, run_started, saved_provenance, say


def train_recipe(s: RunSettings) -> int:
    """Train the preset ``s.model`` into ``s.out`` (resuming what is there); returns the exit
    code."""
    from .._capacity import check_state_fits
    from ..loop import train

    check_run(s)
    out = pathlib.Path(s.out)
    # One training process per output directory; a run refused at startup leaves nothing.
    with run_lock(out, enabled=is_primary(), started=run_started):
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
        check_mesh_fits(mesh, rules, config, batch_size=s.batch_size)
        check_positions(config, s.seq_len)
        model = scratch_model(s, config, tokenizer, mesh, rules, resuming=bool(saved))
        with build_data(s, tokenizer) as data:
            job = Job("train", s, out, mesh, rules, model, data, None, saved)
            result = run(job, train)
        sample(job, result.model, generation={})
    return 0
