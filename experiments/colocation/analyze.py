"""Turn the co-location measurements into the README's tables, headline figures and plot.

    python experiments/colocation/analyze.py            # prints the tables, writes results/opportunity.png
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).parent / "results"
#: latency SLOs (ms) for a whole group's run: every network answers within it
SLOS = {"nb201": [2.0, 5.0, 15.0, 25.0], "torchvision": [2.0, 5.0, 10.0, 25.0]}
SHOWN_BATCHES = [1, 32, 256]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]  # as run.py sweeps them


def opportunity(results: Path = RESULTS) -> pd.DataFrame:
    df = pd.read_csv(results / "opportunity.csv")
    df["reference_speedup"] = df["reference_sequential_ms"] / df["reference_streams_ms"]
    df["fused_speedup"] = df["fused_sequential_ms"] / df["fused_ms"]
    return df


def reference_gap(df: pd.DataFrame) -> float:
    """The largest relative difference between a row's two timings of either way (nasutil.colocate's,
    and the reference captured by run.py)."""
    return float(max((df["streams_ms"] / df["reference_streams_ms"] - 1).abs().max(),
                     (df["sequential_ms"] / df["reference_sequential_ms"] - 1).abs().max()))


def best_within(df: pd.DataFrame, latency: str, throughput: str, slo: float) -> tuple[int | None, float | None]:
    """The batch serving the most images per second with the group's latency within the SLO."""
    within = df[df[latency] <= slo]
    if within.empty:
        return None, None
    best = within.loc[within[throughput].idxmax()]
    return int(best["batch"]), float(best[throughput])


def slo_gaps(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for group, part in df.groupby("group", sort=False):
        for slo in SLOS[group]:
            b_seq, t_seq = best_within(part, "sequential_ms", "sequential_images_per_s", slo)
            b_st, t_st = best_within(part, "streams_ms", "streams_images_per_s", slo)
            rows.append({"group": group, "networks": int(part["networks"].iloc[0]), "slo_ms": slo,
                         "sequential_batch": b_seq, "sequential_images_per_s": t_seq,
                         "streams_batch": b_st, "streams_images_per_s": t_st,
                         "gap": (t_st / t_seq) if t_seq and t_st else None})
    return pd.DataFrame(rows)


def packing(results: Path = RESULTS) -> pd.DataFrame:
    df = pd.read_csv(results / "packing.csv")
    totals = df.groupby(["batch", "way"])["streams_ms"].sum().unstack("way")
    randoms = [c for c in totals.columns if c.startswith("random")]
    out = pd.DataFrame({"packed_ms": totals["packed"], "random_mean_ms": totals[randoms].mean(axis=1),
                        "random_best_ms": totals[randoms].min(axis=1), "random_worst_ms": totals[randoms].max(axis=1)})
    out["speedup_over_random_mean"] = out["random_mean_ms"] / out["packed_ms"]
    out["speedup_over_random_best"] = out["random_best_ms"] / out["packed_ms"]
    return out


def _x(v: float) -> str:
    return f"{v:.2f}x"


def _n(v: float) -> str:
    return f"{v:,.0f}"


def headline(results: Path = RESULTS) -> dict[str, str]:
    """Every figure the README quotes, as the README writes it."""
    df, gaps, pack = opportunity(results), slo_gaps(opportunity(results)), packing(results)
    out: dict[str, str] = {}
    for (group, batch), row in df.set_index(["group", "batch"]).iterrows():
        if batch in SHOWN_BATCHES:
            out[f"{group}_b{batch}_speedup"] = _x(row["speedup"])
            if pd.notna(row["fused_speedup"]):
                out[f"{group}_b{batch}_fused_speedup"] = _x(row["fused_speedup"])
    out["reference_gap"] = f"{100 * reference_gap(df):.1f}%"
    for _, row in gaps.iterrows():
        key = f"{row['group']}_slo{row['slo_ms']:g}"
        out[key] = _x(row["gap"]) if pd.notna(row["gap"]) else "time-only meets no batch"
    top = df.groupby("group")["utilization"].max()
    for group, value in top.items():
        out[f"{group}_best_utilization"] = f"{100 * value:.2f}%"
    for batch, row in pack.iterrows():
        out[f"packing_b{batch}"] = _x(row["speedup_over_random_mean"])
        out[f"packing_b{batch}_packed_ms"] = f"{row['packed_ms']:.2f} ms"
    return out


def markdown_tables(results: Path = RESULTS) -> str:
    df, gaps, pack = opportunity(results), slo_gaps(opportunity(results)), packing(results)
    lines = ["| group | batch per network | sequential ms | streams ms | speedup (reference) | images/s, streams | "
             "utilization | fused ms | fused speedup |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for _, r in df.iterrows():
        fused = (f"{r['fused_ms']:.2f} | {_x(r['fused_speedup'])}" if pd.notna(r["fused_ms"])
                 else "does not apply |")
        lines.append(f"| {r['group']} ({r['networks']}) | {r['batch']} | {r['sequential_ms']:.2f} | "
                     f"{r['streams_ms']:.2f} | {_x(r['speedup'])} ({_x(r['reference_speedup'])}) | "
                     f"{_n(r['streams_images_per_s'])} | {100 * r['utilization']:.2f}% | {fused} |")
    lines += ["", "| group | SLO (ms) | time-only: batch, images/s | space-time: batch, images/s | gap |",
              "| --- | ---: | --- | --- | ---: |"]
    for _, r in gaps.iterrows():
        seq = "none" if pd.isna(r["sequential_batch"]) else \
            f"{int(r['sequential_batch'])}, {_n(r['sequential_images_per_s'])}"
        st = "none" if pd.isna(r["streams_batch"]) else \
            f"{int(r['streams_batch'])}, {_n(r['streams_images_per_s'])}"
        gap = _x(r["gap"]) if pd.notna(r["gap"]) else "time-only meets no batch"
        lines.append(f"| {r['group']} | {r['slo_ms']:g} | {seq} | {st} | {gap} |")
    lines += ["", "| batch per network | packed by prediction (ms) | random groups: mean, best, worst (ms) | "
                  "packed vs random mean |", "| ---: | ---: | --- | ---: |"]
    for batch, r in pack.iterrows():
        lines.append(f"| {batch} | {r['packed_ms']:.2f} | {r['random_mean_ms']:.2f}, {r['random_best_ms']:.2f}, "
                     f"{r['random_worst_ms']:.2f} | {_x(r['speedup_over_random_mean'])} |")
    return "\n".join(lines)


def plot(results: Path = RESULTS) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    df = opportunity(results)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (group, part) in zip(axes, df.groupby("group", sort=False)):
        ax.plot(part["sequential_ms"], part["sequential_images_per_s"], "o-", label="time-only (sequential graphs)")
        ax.plot(part["streams_ms"], part["streams_images_per_s"], "s-", label="space-time (streams, one graph)")
        if part["fused_ms"].notna().any():
            ax.plot(part["fused_ms"], part["networks"] * part["batch"] / (part["fused_ms"] * 1e-3), "^--",
                    label="horizontal fusion (fused, one network)")
        for _, r in part.iterrows():
            ax.annotate(str(r["batch"]), (r["streams_ms"], r["streams_images_per_s"]), fontsize=7,
                        textcoords="offset points", xytext=(3, -9))
        for slo in SLOS[group]:
            ax.axvline(slo, color="grey", lw=0.6, ls=":")
        ax.set_xscale("log")
        ax.set_xticks([1, 2, 5, 10, 20, 50, 100])
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("group latency (ms, log); dotted: SLOs")
        ax.set_ylabel("images per second, whole group")
        ax.set_title(f"{group}: {int(part['networks'].iloc[0])} networks on one H200, fp16")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = results / "opportunity.png"
    fig.savefig(path, dpi=120)
    return path


if __name__ == "__main__":
    print(markdown_tables())
    for key, value in headline().items():
        print(f"{key}: {value}")
    print(plot())
