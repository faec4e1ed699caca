"""What the numbers say: short paragraphs computed from each result's data for the doc."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._flash_versus_analysis import paragraphs as _flash_versus
from ._flash_vmem import paragraphs as _flash_vmem
from ._stats import median


def _training(result: dict[str, Any]) -> list[str]:
    out = []
    for name, entry in result["data"].items():
        summary = entry["summary"]
        z, h = summary["zoo"], summary["hf"]
        text = (
            f"**{name}.** zoo/HF = {summary['ratio']:.2f}× (per-round ratios "
            f"{', '.join(f'{r:.2f}' for r in summary['round_ratios'])}); MFU zoo "
            f"{100 * z['mfu']:.0f}%, HF {100 * h['mfu']:.0f}%."
        )
        zb, hb = z.get("breakdown"), h.get("breakdown")
        if zb and hb:
            text += (
                f" Step: zoo {z['step_s']:.2f} s = matmuls {zb['matmul_s']:.2f} + attention "
                f"{zb['attention_s']:.2f} + rest {zb['rest_s']:.2f}; transformers "
                f"{h['step_s']:.2f} s = {hb['matmul_s']:.2f} + {hb['attention_s']:.2f} + "
                f"{hb['rest_s']:.2f}."
            )
            gaps = {
                "matmuls": zb["matmul_s"] - hb["matmul_s"],
                "attention": zb["attention_s"] - hb["attention_s"],
                "the rest": zb["rest_s"] - hb["rest_s"],
            }
            worst = max(gaps, key=lambda k: gaps[k])
            if gaps[worst] > 0:
                text += f" zoo loses most in {worst} ({gaps[worst]:+.2f} s per step)"
                if worst == "attention":
                    text += (
                        f": its `{zb['attention_kernel']}` kernel is blockwise attention compiled "
                        "by XLA (batched 256×64 matmuls, separate max/exp/sum passes), "
                        "transformers' is PyTorch's hand-written, vectorised C++ flash kernel"
                    )
                text += "."
            target_step = h["step_s"] / 1.5
            if summary["ratio"] < 1.5 and zb["matmul_s"] > target_step:
                text += (
                    f" 1.5× would need a {target_step:.2f} s step, less than zoo's matmuls alone "
                    f"at the rates this machine gives them ({zb['matmul_s']:.2f} s): out of "
                    "reach without faster GEMMs, whatever the rest costs."
                )
            elif summary["ratio"] < 1.5:
                text += (
                    f" 1.5× would need a {target_step:.2f} s step: matmuls at their measured "
                    f"rates ({zb['matmul_s']:.2f} s) would leave "
                    f"{target_step - zb['matmul_s']:.2f} s for attention and everything else."
                )
        out.append(text)
    return out


def _attention(result: dict[str, Any]) -> list[str]:
    runs = result["data"]["runs"]
    by = {(r["config"]["implementation"], r["config"]["seq_len"]): r for r in runs}
    common = [
        t
        for (impl, t), r in by.items()
        if impl == "xla"
        and r["forward_backward"]["status"] == "ok"
        and by.get(("chunked", t), {}).get("forward_backward", {}).get("status") == "ok"
    ]
    out = []
    if common:
        t = max(common)
        x = median(by[("xla", t)]["forward_backward"]["times_s"])
        c = median(by[("chunked", t)]["forward_backward"]["times_s"])
        xm = by[("xla", t)]["forward_backward"]["peak_rss_bytes"] / 2**30
        cm = by[("chunked", t)]["forward_backward"]["peak_rss_bytes"] / 2**30
        out.append(
            f"At T={t}, `chunked` forward+backward takes {c:.1f} s and {cm:.2f} GiB against "
            f"`xla`'s {x:.1f} s and {xm:.2f} GiB: `xla` materialises the T² scores (memory ∝ T², "
            "its softmax is elementwise-bound on CPU), `chunked` keeps O(T) state and skips "
            "blocks above the causal diagonal."
        )
    return out


def _compile(result: dict[str, Any]) -> list[str]:
    data = result["data"]["depths"]
    total = lambda d, k: d[k]["lower_s"] + d[k]["compile_s"]
    first, last = data[0], data[-1]
    scan_times = [total(d, "scan") for d in data]
    out = [
        f"Under one scan the lowered program does not grow with depth: "
        f"{first['scan']['hlo_chars'] / 1000:.0f}k characters of HLO at {first['n_layers']} layer(s), "
        f"{last['scan']['hlo_chars'] / 1000:.0f}k at {last['n_layers']}; trace+lower+compile stays "
        f"between {min(scan_times):.1f} and {max(scan_times):.1f} s over the sweep, with no trend "
        "in depth (the spread is the machine's load, not the model)."
    ]
    unrolled = [d for d in data if "unrolled" in d]
    if unrolled:
        u = unrolled[-1]
        out.append(
            f"Unrolled, the HLO grows linearly with depth ({u['unrolled']['hlo_chars'] / 1000:.0f}k "
            f"characters at {u['n_layers']} layers against {u['scan']['hlo_chars'] / 1000:.0f}k "
            f"scanned; {total(u, 'unrolled'):.1f} s against {total(u, 'scan'):.1f} s to compile)."
        )
    return out


def _checkpoint(result: dict[str, Any]) -> list[str]:
    s = result["data"]["summary"]
    zoo, orbax, plain = (
        s.get("zoo_train.Checkpointer"),
        s.get("orbax StandardCheckpointer"),
        s.get("plain write/read"),
    )
    if not (zoo and orbax and plain):
        return []
    return [
        f"zoo_train.Checkpointer saves at {zoo['save_gib_per_s']:.2f} GiB/s against "
        f"{plain['save_gib_per_s']:.2f} GiB/s for a plain write of the same bytes "
        f"({zoo['save_s'] / plain['save_s']:.1f}× the time); bare Orbax takes "
        f"{orbax['save_s']:.1f} s of its {zoo['save_s']:.1f} s, the rest ({zoo['save_s'] - orbax['save_s']:.1f} s) "
        "is zoo's own work: copying the live buffers (the step donates them) and one checksum "
        f"per array. Restores: {zoo['restore_s']:.1f} s (zoo, checksums verified), "
        f"{orbax['restore_s']:.1f} s (Orbax), {plain['restore_s']:.1f} s (plain read)."
    ]


def _flash_tpu(result: dict[str, Any]) -> list[str]:
    rows = [r for r in result["data"]["report"].get("rows", []) if "error" not in r]
    if not rows:
        return []
    worst = max(rows, key=lambda r: r["temp_bytes"] * r["devices"] / r["score_matrix_bytes_global"])
    share = worst["temp_bytes"] * worst["devices"] / worst["score_matrix_bytes_global"]
    return [
        f"Every compiled case keeps its temporaries at or below {100 * share:.2f}% of the float32 "
        f"T² score matrix ({worst['label']}: {worst['temp_bytes'] / 2**20:.1f} MiB per device): "
        "the kernel never materialises the scores, on any generation."
    ]


ANALYSES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "training": _training,
    "attention": _attention,
    "compile": _compile,
    "checkpoint": _checkpoint,
    "flash_tpu": _flash_tpu,
    "flash_versus": _flash_versus,
    "flash_vmem": _flash_vmem,
}


def analyse(result: dict[str, Any]) -> list[str]:
    """Paragraphs about ``result`` (none for unavailable results)."""
    fn = ANALYSES.get(result["name"])
    if fn is None or result["status"] != "ok":
        return []
    try:
        return fn(result)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return []  # an older or partial result file: the tables still stand
