"""Where the installed flash_tpu stands against splash, 0.1.1 and 0.2.0: paragraphs from
``flash_versus`` data.

The installed version's label is the one the run recorded (``data["installed"]``, its
distribution version); nothing here names it.
"""

from __future__ import annotations

from typing import Any

MiB = 2**20
REFERENCE = ("v5e", 8192, 4)  # the cell the flash_traffic target and the changelog quote
FIRST, GROUPED = "0.1.1", "0.2.0"  # the release before GQA grouping, and the first with it


def installed_label(result: dict[str, Any]) -> str | None:
    """The installed version's column: recorded by the run, else (a result written before the
    label was recorded) the zoo column that came from no wheel."""
    data = result["data"]
    if data.get("installed"):
        return data["installed"]
    columns = data.get("columns", {})
    return next(
        (k for k, c in columns.items() if k != "splash" and not c.get("wheel")),
        None,
    )


def _by_cell(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, dict[str, Any]]]:
    cells: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["chip"], r["seq_len"], r["group"]), {})[r["kernel"]] = r
    return cells


def _temp(row: dict[str, Any] | None, key: str) -> float | None:
    reply = (row or {}).get(key) or {}
    return reply["temp_bytes"] / MiB if "temp_bytes" in reply else None


def _compile(row: dict[str, Any], key: str) -> str:
    reply = row.get(key) or {}
    return f"{reply['compile_s']:.1f} s" if "compile_s" in reply else "—"


def _cell(cell: tuple) -> str:
    return f"{cell[0]} T={cell[1]:,} G={cell[2]}"


def _reference(cell: tuple, kernels: dict[str, dict[str, Any]], inst: str) -> str | None:
    new, splash, old = kernels.get(inst), kernels.get("splash"), kernels.get(FIRST)
    if not new or not splash or "kv_mib" not in new["model"]:
        return None
    chip, t, g = cell
    n, s = new["model"], splash["model"]
    text = (
        f"**{inst} against splash ({chip}, T={t:,}, G={g}).** Modelled K/V per forward "
        f"{n['kv_mib']:,.0f} MiB against splash's {s['kv_mib']:,.0f} MiB "
        f"({s['kv_mib'] / n['kv_mib']:.1f}× less)"
    )
    if old and "kv_mib" in old["model"]:
        text += f" and {FIRST}'s {old['model']['kv_mib']:,.0f} MiB"
    text += (
        f"; all HBM traffic {n['total_mib']:,.0f} against {s['total_mib']:,.0f} MiB; "
        f"{n['steps']:,} working grid steps against {s['steps']:,}."
    )
    parts = []
    for key, name in (("fwd", "forward"), ("fwd_bwd", "forward+backward")):
        a, b = _temp(new, key), _temp(splash, key)
        if a is not None and b is not None:
            parts.append(f"{name} {a:,.1f} against {b:,.1f} MiB")
    if parts:
        text += " Compiled temporaries: " + ", ".join(parts) + "."
    compiled = [
        f"{name} {_compile(new, key)} against {_compile(splash, key)}"
        for key, name in (("fwd", "forward"), ("fwd_bwd", "forward+backward"))
        if _compile(new, key) != "—" and _compile(splash, key) != "—"
    ]
    if compiled:
        text += (
            " Compile: " + ", ".join(compiled) + " (on a loaded 2-core machine: differences "
            "under a second are noise)."
        )
    return text


def _spread(
    result: dict[str, Any], cells: dict[tuple, dict[str, dict[str, Any]]], inst: str
) -> str | None:
    ratios, bwd = [], []
    for kernels in cells.values():
        new, splash = kernels.get(inst), kernels.get("splash")
        if not new or not splash or "kv_mib" not in new["model"]:
            continue
        ratios.append(splash["model"]["kv_mib"] / new["model"]["kv_mib"])
        a, b = _temp(new, "fwd_bwd"), _temp(splash, "fwd_bwd")
        if a is not None and b is not None:
            bwd.append(b / a)
    if not ratios:
        return None
    text = (
        f"Across the table {inst}'s modelled K/V per forward is {min(ratios):.1f}–"
        f"{max(ratios):.1f}× below splash's: splash at its default 128×128 blocks walks every "
        f"query head's own row of key blocks, so its K/V does not fall with G, while {inst} "
        "takes a group's heads per grid step."
    )
    tuned = [d for d in result["data"].get("splash_with_zoo_blocks", []) if d["group"] > 1]
    ref = next((d for d in tuned if (d["chip"], d["seq_len"], d["group"]) == REFERENCE), None)
    if ref and REFERENCE in cells and inst in cells[REFERENCE]:
        new = cells[REFERENCE][inst]["model"]
        old = cells[REFERENCE].get(FIRST, {}).get("model", {})
        text += (
            f" Given {inst}'s own blocks ({ref['blocks'].replace('x', '×')} on "
            f"{REFERENCE[0]}) splash would model at {ref['kv_mib']:,.0f} MiB at "
            f"T={REFERENCE[1]:,}, G={REFERENCE[2]}"
        )
        if old.get("kv_mib") == ref["kv_mib"]:
            text += f": {FIRST}'s figure"
        text += f", still {ref['kv_mib'] / new['kv_mib']:.0f}× {inst}'s."
    if bwd:
        text += (
            f" Forward+backward temporaries: splash's are {min(bwd):.1f}–{max(bwd):.1f}× {inst}'s."
        )
    return text


def _against_first(cells: dict[tuple, dict[str, dict[str, Any]]], inst: str) -> str | None:
    """The installed version against 0.1.1 over every cell both compiled."""
    kv, fwd, both = [], [], []
    for cell, kernels in cells.items():
        new, old = kernels.get(inst), kernels.get(FIRST)
        if not new or not old:
            continue
        if "kv_mib" in new["model"] and "kv_mib" in old["model"]:
            kv.append(old["model"]["kv_mib"] / new["model"]["kv_mib"])
        for key, out in (("fwd", fwd), ("fwd_bwd", both)):
            a, b = _temp(new, key), _temp(old, key)
            if a is not None and b is not None:
                out.append((a - b, cell, a, b))
    if not kv:
        return None
    text = (
        f"**{inst} against {FIRST}.** Modelled K/V per forward {min(kv):.0f}–{max(kv):.0f}× "
        f"below {FIRST}'s (the GQA group: 1× at G=1)."
    )
    if fwd:
        lower = [d for d in fwd if d[0] < -0.05 * d[3]]
        higher = [d for d in fwd if d[0] > 0.05 * d[3]]
        same = sum(abs(d[0]) < 0.05 for d in fwd)
        text += (
            f" Forward-only temporaries within 5% of {FIRST}'s in "
            f"{len(fwd) - len(lower) - len(higher)} of {len(fwd)} cells ({same} equal to "
            "0.1 MiB)."
        )
        for name, some in (("Lower", lower), ("Higher", higher)):
            if some:
                text += f" {name} in " + "; ".join(
                    f"{_cell(c)} ({a:,.1f} against {b:,.1f} MiB)" for _, c, a, b in some
                )
                text += "."
    if both:
        gap = max(both, key=lambda d: abs(d[0]))
        if abs(gap[0]) < 0.05:
            text += f" Forward+backward temporaries equal to 0.1 MiB in all {len(both)} cells."
        else:
            text += (
                f" Forward+backward temporaries differ by at most {abs(gap[0]):.1f} MiB "
                f"({_cell(gap[1])}: {gap[2]:,.1f} against {gap[3]:,.1f})."
            )
    return text


def _since_grouped(cells: dict[tuple, dict[str, dict[str, Any]]], inst: str) -> str | None:
    """0.2.0 → the installed version: where 0.2.0's forward temporaries were above 0.1.1's,
    where the installed version's are above 0.2.0's, and the forward+backward gap."""
    if inst == GROUPED:
        return None
    worse, above, both = [], [], []
    for cell, kernels in cells.items():
        mid, old = _temp(kernels.get(GROUPED), "fwd"), _temp(kernels.get(FIRST), "fwd")
        new = _temp(kernels.get(inst), "fwd")
        if mid is not None and old is not None and mid > 1.2 * old:
            worse.append((cell, mid, old, new))
        if mid is not None and new is not None and new > 1.05 * mid:
            above.append((cell, new, mid, old))
        a, b = _temp(kernels.get(inst), "fwd_bwd"), _temp(kernels.get(GROUPED), "fwd_bwd")
        if a is not None and b is not None:
            both.append((a - b, cell, a, b))
    if not worse and not above and not both:
        return None
    text = f"**{GROUPED} → {inst}.**"
    if worse:
        shown = "; ".join(f"{_cell(c)}: {m:,.0f} against {o:,.0f}" for c, m, o, _ in worse)
        text += (
            f" Forward-only temporaries of {GROUPED} exceed {FIRST}'s in {len(worse)} cells "
            f"({shown} MiB): in the compiled {GROUPED} forward q is scaled in one fusion and "
            "copied to the kernel layout in another, two q-sized buffers where "
            f"{FIRST} has one layout copy."
        )
        have = [(c, m, o, n) for c, m, o, n in worse if n is not None]
        if have:
            back = [n for _, _, o, n in have if abs(n - o) <= 0.01 * o]
            saved = [m - n for _, m, _, n in have]
            text += f" {inst} in the same cells: " + "; ".join(
                f"{_cell(c)}: {n:,.1f} MiB" for c, _, _, n in have
            )
            span = f"{min(saved):,.0f}"
            if round(min(saved)) != round(max(saved)):
                span += f"–{max(saved):,.0f}"
            text += (
                f", {FIRST}'s figure (within 1%) in {len(back)} of {len(have)}; "
                f"{span} MiB less than {GROUPED}'s."
            )
        else:
            text += f" {inst} has no forward figure in those cells."
    if above:
        text += (
            f" Forward-only temporaries of {inst} above {GROUPED}'s (by more than 5%; the "
            "figures leave out buffers XLA keeps in VMEM) in "
        )
        text += "; ".join(
            f"{_cell(c)}: {n:,.1f} against {m:,.1f} MiB"
            + (f" ({FIRST}: {o:,.1f})" if o is not None else "")
            for c, n, m, o in above
        )
        text += "."
    elif worse:
        text += f" Nowhere are {inst}'s forward temporaries more than 5% above {GROUPED}'s."
    if both:
        gap = max(both, key=lambda d: abs(d[0]))
        text += (
            f" Forward+backward temporaries of {inst} and {GROUPED} differ by at most "
            f"{abs(gap[0]):.1f} MiB ({_cell(gap[1])}: {gap[2]:,.1f} against {gap[3]:,.1f})."
        )
    return text


def paragraphs(result: dict[str, Any]) -> list[str]:
    """The reference cell, the spread over the table, the installed version against 0.1.1, and
    0.2.0 → the installed version."""
    inst = installed_label(result)
    if inst is None:
        return []
    cells = _by_cell(result["data"]["rows"])
    ref = REFERENCE if REFERENCE in cells else next(iter(cells), None)
    out = [_reference(ref, cells[ref], inst)] if ref else []
    out += [
        _spread(result, cells, inst),
        _against_first(cells, inst),
        _since_grouped(cells, inst),
    ]
    return [p for p in out if p]
