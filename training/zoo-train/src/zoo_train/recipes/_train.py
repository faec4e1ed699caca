"""``zoo train``: a preset model trained from scratch on the settings' data."""

from __future__ import annotations

import pathlib

from ..loop import Trainer
from ..settings import RunSettings
from ._steps import (
    build_data,
    check_mesh_fits,
    check_run,
    check_train_positions,
    complete_step,
    mesh_and_rules,
    open_trackers,
    output_directory,
    preset_config,
    run_info,
    run_tokenizer,
    sample,
    saved_provenance,
    say,
    say_complete,
    scratch_model,
    steps_for_epochs,
    train_and_report,
    trained,
)


def train(s: RunSettings) -> int:
    """Train the preset ``s.model`` into ``s.out`` (resuming what is there); returns the exit
    code."""
    from .._capacity import check_state_fits

    check_run(s)
    out = pathlib.Path(s.out)
    done = complete_step(s)
    if done is not None:  # nothing is built, nothing in the run is touched
        return say_complete(out, done, s)
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
        check_mesh_fits(mesh, rules, config, batch_size=s.batch_size, seq_len=s.seq_len)
        check_train_positions(config, s.seq_len, settable=True)
        model = scratch_model(s, config, tokenizer, mesh, rules, resuming=bool(saved))
        with build_data(s, tokenizer) as data:
            s = steps_for_epochs(s, data.train)
            info = run_info(model, preset=s.model)
            trainer = Trainer(s.train_config(), model.model, None, out, mesh=mesh, run_info=info)
            result = train_and_report(trainer, s, "train", model, data, None, saved, trackers)
        if trained(result):
            sample(s, trainer, tokenizer, result, {}, trackers)
    return 0
