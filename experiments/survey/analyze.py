"""Analyse the CNN survey's measurements (run.py) into plots, a summary table and headline numbers.

    python experiments/survey/analyze.py [--results experiments/survey/results] [--markdown]

Reads survey.csv, survey_compile.csv and layers_<model>.csv from the results folder and writes
util_vs_batch.png, util_vs_flops.png, throughput_vs_accuracy.png, layers.png, counters.png,
summary.csv and summary.json there. `--markdown` also prints the headline numbers and the results
table that the README quotes. Needs pandas and matplotlib; torchvision (optional) supplies the
ImageNet-1K accuracy of its models' default weights. No GPU is needed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import pandas as pd

BATCHES = (1, 8, 64, 256)
DTYPE = "fp16"  # the survey's main dtype; bf16 covers a subset
INPUT_SIZE = 224
LAYER_MODELS = ("resnet50", "efficientnet_b0", "mobilenet_v3_large")
FAMILY_ORDER = ("ResNet", "ResNeXt/WideResNet", "VGG", "DenseNet", "MobileNet", "EfficientNet", "RegNet",
                "ConvNeXt", "ShuffleNet", "other")
FAMILY_PREFIXES = (("resnext", "ResNeXt/WideResNet"), ("wide_resnet", "ResNeXt/WideResNet"), ("resnet", "ResNet"),
                   ("vgg", "VGG"), ("densenet", "DenseNet"), ("mobilenet", "MobileNet"),
                   ("efficientnet", "EfficientNet"), ("regnet", "RegNet"), ("convnext", "ConvNeXt"),
                   ("shufflenet", "ShuffleNet"))
# squeeze-and-excitation blocks (torchvision's SqueezeExcitation): their leaf modules' names
SE_LEAVES = (".avgpool", ".fc1", ".fc2", ".activation", ".scale_activation")
LAYER_GROUPS = {"conv7x7": "dense conv k×k", "conv3x3": "dense conv k×k", "conv1x1": "conv 1×1",
                "dwconv3x3": "depthwise conv", "dwconv5x5": "depthwise conv", "norm": "BatchNorm",
                "act": "activation", "pool": "pooling", "linear": "linear"}


# ---------------------------------------------------------------- loading


def family(arch: str) -> str:
    """The model family a plot colours by."""
    for prefix, name in FAMILY_PREFIXES:
        if arch.startswith(prefix):
            return name
    return "other"


def load_survey(results: Path) -> pd.DataFrame:
    """survey.csv with a family column; every row must have been measured successfully."""
    df = pd.read_csv(results / "survey.csv")
    df["family"] = df["arch"].map(family)
    return df


def load_counters(results: Path) -> pd.DataFrame:
    """The batch-256 CUDA-graph counters re-measured with converged windows (counters.py), by architecture."""
    return pd.read_csv(results / "counters_b256.csv").set_index("arch")


def load_compile(results: Path) -> pd.DataFrame:
    """survey_compile.csv (torch.compile at batch 256)."""
    return pd.read_csv(results / "survey_compile.csv")


def load_layers(results: Path, arch: str) -> pd.DataFrame:
    """layers_<arch>.csv with a `group` column: SE blocks apart, depthwise convs together."""
    df = pd.read_csv(results / f"layers_{arch}.csv")
    df["group"] = [layer_group(name, kind) for name, kind in zip(df["name"], df["kind"])]
    return df


def layer_group(name: str, kind: str) -> str:
    """A layer's group in the per-layer view: a squeeze-and-excitation leaf, or its kind's group."""
    if name.endswith(SE_LEAVES) and "." in name:
        return "squeeze-excite"
    return LAYER_GROUPS.get(kind, "other")


def select(df: pd.DataFrame, mode: str, batch: int, dtype: str = DTYPE) -> pd.DataFrame:
    """One mode, batch size and dtype, indexed by architecture."""
    rows = df[(df["mode"] == mode) & (df["batch_size"] == batch) & (df["dtype"] == dtype)]
    return rows.set_index("arch")


# ---------------------------------------------------------------- accuracy


def top1(space: str, arch: str) -> tuple[float | None, int | None]:
    """ImageNet-1K top-1 (%) of the library's default weights and the crop size it was evaluated at.

    torchvision publishes it in its weights' metadata. timm's installed package publishes no
    accuracy (its pretrained configs carry none), so timm models get None.
    """
    if space == "torchvision":
        try:
            from torchvision.models import get_model_weights
        except ImportError:
            return None, None
        weights = get_model_weights(arch).DEFAULT
        crop = weights.transforms().crop_size
        return float(weights.meta["_metrics"]["ImageNet-1K"]["acc@1"]), int(crop[0])
    if space == "timm":
        try:
            import timm
        except ImportError:
            return None, None
        cfg = timm.models.get_pretrained_cfg(arch)
        found = {k: v for k, v in (cfg.to_dict() if cfg else {}).items() if "top1" in k or "acc" in k}
        return (float(next(iter(found.values()))), None) if found else (None, None)
    return None, None


# ---------------------------------------------------------------- formatting


def pct(fraction: float) -> str:
    """A fraction as a percentage with three significant digits: 0.2767 -> '27.7%', 0.26 -> '26.0%'."""
    value = 100 * fraction
    return f"{value:.0f}%" if value >= 100 else f"{value:#.3g}%"


def ms(value: float) -> str:
    return f"{value:.3g} ms"


def times(ratio: float) -> str:
    return f"{ratio:.2f}×"


# ---------------------------------------------------------------- tables


def summary(results: Path, with_accuracy: bool = True) -> pd.DataFrame:
    """One row per model (plan order): family, size, utilization per batch and mode, throughput, latency,
    top-1, tensor-pipe activity at batch 256."""
    df = load_survey(results)
    comp = load_compile(results).set_index("arch")
    models = df.drop_duplicates("arch").set_index("arch")
    out = pd.DataFrame(index=models.index)
    out["space"] = models["space"]
    out["family"] = models["family"]
    out["gflops_per_image"] = models["flops_per_image"] / 1e9
    out["params_m"] = models["params"] / 1e6
    for batch in BATCHES:
        out[f"util_b{batch}_cudagraph_pct"] = 100 * select(df, "cudagraph", batch)["utilization"]
    for batch in (1, 256):
        out[f"util_b{batch}_eager_pct"] = 100 * select(df, "eager", batch)["utilization"]
    out["util_b256_compile_pct"] = 100 * comp["utilization"]
    fp16 = pd.concat([df[df["dtype"] == DTYPE], comp[comp["dtype"] == DTYPE].reset_index()])
    best = fp16.sort_values("throughput_per_s").groupby("arch").tail(1).set_index("arch")
    out["best_throughput_per_s"] = best["throughput_per_s"]
    out["best_throughput_at"] = best["mode"] + " b" + best["batch_size"].astype(str)
    out["throughput_b256_cudagraph_per_s"] = select(df, "cudagraph", 256)["throughput_per_s"]
    out["latency_b1_eager_ms"] = select(df, "eager", 1)["latency_ms"]
    out["latency_b1_cudagraph_ms"] = select(df, "cudagraph", 1)["latency_ms"]
    out["tensor_activity_b256_pct"] = select(df, "cudagraph", 256)["counter_tensor_activity"]
    out["sm_activity_b256_pct"] = select(df, "cudagraph", 256)["counter_sm_activity"]
    if with_accuracy:
        add_accuracy(out)
    return out.reset_index()


def add_accuracy(table: pd.DataFrame) -> None:
    """Published top-1 (%) and the crop (px) it was evaluated at, where the library publishes one."""
    acc = [top1(space, arch) for arch, space in table["space"].items()]
    table["top1_pct"] = [a for a, _ in acc]
    table["top1_crop_px"] = pd.array([c for _, c in acc], dtype="Int64")


def markdown_table(table: pd.DataFrame) -> str:
    """The README's results table, sorted by utilization at batch 256."""
    head = ("| model | family | GFLOPs/image | params (M) | util b1 | util b8 | util b64 | util b256 "
            "| images/s b256 | top-1 (%) |")
    lines = [head, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for _, r in table.sort_values("util_b256_cudagraph_pct", ascending=False).iterrows():
        acc = r.get("top1_pct")
        acc_text = "n/a" if acc is None or pd.isna(acc) else f"{acc:.1f}"
        if acc_text != "n/a" and r.get("top1_crop_px") not in (None, INPUT_SIZE) and not pd.isna(r["top1_crop_px"]):
            acc_text += f" (at {int(r['top1_crop_px'])} px)"
        utils = " | ".join(pct(r[f"util_b{b}_cudagraph_pct"] / 100) for b in BATCHES)
        lines.append(f"| {r['arch']} | {r['family']} | {r['gflops_per_image']:.2f} | {r['params_m']:.1f} | {utils} "
                     f"| {r['throughput_b256_cudagraph_per_s']:,.0f} | {acc_text} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- headline numbers


def headline(results_dir: str | Path) -> dict[str, str]:
    """The numbers the README quotes, formatted exactly as quoted, computed from the measured CSVs."""
    results = Path(results_dir)
    df = load_survey(results)
    h: dict[str, str] = {}
    h.update(machine_numbers(df))
    h.update(utilization_numbers(df))
    h.update(mode_numbers(df))
    h.update(compile_numbers(df, load_compile(results)))
    h.update(bf16_numbers(df))
    h.update(counter_numbers(df, load_counters(results)))
    for arch in LAYER_MODELS:
        h.update(layer_numbers(load_layers(results, arch), arch))
    return h


def machine_numbers(df: pd.DataFrame) -> dict[str, str]:
    """Device, software and the peak that utilization divides by."""
    return {"device": "/".join(sorted(df["device_name"].unique())),
            "driver": "/".join(sorted(df["driver_version"].astype(str).unique())),
            "torch": "/".join(sorted(df["torch_version"].unique())),
            "peak": "/".join(f"{p:g} TFLOP/s" for p in sorted(df["peak_tflops"].unique())),
            "sm_clock": f"{df['sm_clock_mhz'].min():.0f}–{df['sm_clock_mhz'].max():.0f} MHz",
            "n_models": str(df["arch"].nunique()),
            "n_by_space": ", ".join(f"{n} {space}"
                                    for space, n in df.drop_duplicates("arch")["space"].value_counts().items()),
            "n_rows": str(len(df)),
            "n_noisy": f"{int(df['noisy'].sum())} of {len(df)}",
            "noisy_modes": "/".join(sorted(df.loc[df["noisy"], "mode"].unique())),
            "timm_models": ", ".join(df.loc[df["space"] == "timm", "arch"].unique())}


def extreme(series: pd.Series, best: bool) -> str:
    """'27.7% (wide_resnet50_2)' for the largest (best) or smallest utilization of a per-model series."""
    arch = series.idxmax() if best else series.idxmin()
    return f"{pct(series[arch])} ({arch})"


def utilization_numbers(df: pd.DataFrame) -> dict[str, str]:
    """Utilization range at batch 1 and 256 (CUDA graphs) and how it saturates with batch size."""
    u = {b: select(df, "cudagraph", b)["utilization"] for b in BATCHES}
    gflops = select(df, "cudagraph", 256)["flops_per_image"] / 1e9
    share64 = u[64] / u[256]
    heavy, light = share64[gflops >= 5], share64[gflops < 1]
    return {"best_util_b256": extreme(u[256], True), "worst_util_b256": extreme(u[256], False),
            "median_util_b256": pct(u[256].median()),
            "below_5pct_b256": f"{int((u[256] < 0.05).sum())} of {len(u[256])}",
            "best_util_b1": extreme(u[1], True), "worst_util_b1": extreme(u[1], False),
            "median_util_b1": pct(u[1].median()),
            "heavy_b64_share": f"{pct(heavy.median())} (n={len(heavy)})",
            "light_b64_share": f"{pct(light.median())} (n={len(light)})",
            "vgg_b8_share": pct((u[8] / u[256])[[a for a in u[8].index if a.startswith("vgg")]].median())}


def mode_numbers(df: pd.DataFrame) -> dict[str, str]:
    """CUDA-graph replay against eager execution, at batch 1 and batch 256."""
    e1, g1 = select(df, "eager", 1)["latency_ms"], select(df, "cudagraph", 1)["latency_ms"]
    e256, g256 = select(df, "eager", 256)["latency_ms"], select(df, "cudagraph", 256)["latency_ms"]
    speed1, speed256 = e1 / g1, e256 / g256
    return {"graph_faster_b1": f"{int((speed1 > 1).sum())} of {len(speed1)}",
            "graph_speedup_b1_median": times(speed1.median()),
            "graph_speedup_b1_range": f"{speed1.min():.2f}–{speed1.max():.2f}×",
            "eager_b1_latency_range": f"{e1.min():.2f}–{e1.max():.2f} ms",
            "graph_b1_latency_range": f"{g1.min():.2f}–{g1.max():.2f} ms",
            "resnet50_b1": f"{ms(e1['resnet50'])} eager, {ms(g1['resnet50'])} from a CUDA graph",
            "graph_speedup_b256_median": times(speed256.median()),
            "graph_speedup_b256_max": f"{times(speed256.max())} ({speed256.idxmax()})"}


def compile_numbers(df: pd.DataFrame, comp: pd.DataFrame) -> dict[str, str]:
    """torch.compile against CUDA-graph replay at the compile batch size, per compiled model."""
    out = {}
    for _, c in comp.iterrows():
        g = select(df, "cudagraph", int(c["batch_size"]), c["dtype"]).loc[c["arch"]]
        out[f"compile_{c['arch']}"] = (f"{pct(c['utilization'])} vs {pct(g['utilization'])} "
                                       f"({times(g['latency_ms'] / c['latency_ms'])} faster)")
    return out


def bf16_numbers(df: pd.DataFrame) -> dict[str, str]:
    """bf16 against fp16 latency at batch 256 (CUDA graphs) for the bf16 subset."""
    bf = select(df, "cudagraph", 256, "bf16")["latency_ms"]
    ratio = bf / select(df, "cudagraph", 256)["latency_ms"].loc[bf.index]
    return {"bf16_ratio_b256": f"{ratio.min():.2f}–{ratio.max():.2f}×",
            "bf16_slowest": f"{ratio.idxmax()} ({times(ratio.max())})"}


def counter_numbers(df: pd.DataFrame, converged: pd.DataFrame) -> dict[str, str]:
    """What the GPM counters say at batch 256 (CUDA graphs; the converged re-measurement): SM activity
    against FLOP utilization. The oddities are those of the grid's short-window counters."""
    b = converged
    sm, tensor, util = b["counter_sm_activity"], b["counter_tensor_activity"], 100 * b["utilization"]
    over80 = int((sm >= 80).sum())
    referenced = b.dropna(subset=["reference_sm_activity"])
    gap = max((referenced["counter_sm_activity"] - referenced["reference_sm_activity"]).abs().max(),
              (referenced["counter_tensor_activity"] - referenced["reference_tensor_activity"]).abs().max())
    short = select(df, "cudagraph", 256)["counter_sm_activity"]
    under = (sm - short.reindex(sm.index)).sort_values(ascending=False)
    gpm = ["counter_sm_activity", "counter_sm_occupancy", "counter_tensor_activity", "counter_dram_bw_util"]
    zeros = df[(df[gpm] == 0).all(axis=1)]
    ratio = df["counter_tensor_activity"] / (100 * df["utilization"])
    odd = df.loc[ratio.idxmax()]
    nvml_zero = int(((df["counter_nvml_gpu_util"] == 0) & (df["counter_sm_activity"] > 0.5)).sum())
    return {"sm_activity_b256": f"{sm.min():.1f}–{sm.max():.1f}% (median {sm.median():.1f}%)",
            "sm_activity_over80": f"{over80} of {len(sm)}",
            "tensor_util_corr": f"r = {tensor.corr(util):.3f}",
            "tensor_over_util_median": times(statistics.median(tensor / util)),
            "dram_bw_b256": f"{b['counter_dram_bw_util'].min():.0f}–{b['counter_dram_bw_util'].max():.0f}%",
            "nvml_util_b256_median": f"{b['counter_nvml_gpu_util'].median():.0f}%",
            "counters_converged": f"{int(b['counters_converged'].sum())} of {len(b)}",
            "counters_reference_gap": f"{gap:.1f} points",
            "counters_reference_models": f"{len(referenced)} models",
            "short_window_worst": "; ".join(f"{arch} {short[arch]:.1f}% against {sm[arch]:.1f}%"
                                            for arch in under.index[:2]),
            "counter_all_zero": "; ".join(f"{r.arch} {r.dtype} batch {r.batch_size} {r.mode}"
                                          for r in zeros.itertuples()),
            "counter_odd_tensor": (f"{odd['arch']} {odd['dtype']} batch {odd['batch_size']} {odd['mode']}: "
                                   f"tensor-pipe activity {odd['counter_tensor_activity']:.1f}% at "
                                   f"{pct(odd['utilization'])} FLOP utilization"),
            "nvml_zero_while_busy": f"{nvml_zero} of {len(df)}"}


def layer_numbers(layers: pd.DataFrame, arch: str) -> dict[str, str]:
    """Where one model's kernel time goes at the per-layer batch size (eager)."""
    total = layers["time_ms"].sum()
    by = layers.groupby("group").agg(time=("time_ms", "sum"), flops=("flops_per_batch", "sum"))
    share = by["time"] / total
    zero = layers.loc[layers["flops_per_batch"] == 0, "time_ms"].sum() / total
    convs = by.loc[[g for g in by.index if "conv" in g and g != "depthwise conv"]]
    out = {f"layers_{arch}_total": ms(total),
           f"layers_{arch}_zero_flop_share": pct(zero),
           f"layers_{arch}_norm_share": pct(share.get("BatchNorm", 0.0)),
           f"layers_{arch}_act_share": pct(share.get("activation", 0.0)),
           f"layers_{arch}_conv_util": pct(group_util(convs["flops"].sum(), convs["time"].sum(), layers))}
    if "depthwise conv" in by.index:
        dw = by.loc["depthwise conv"]
        dw_util = group_util(dw["flops"], dw["time"], layers)
        out[f"layers_{arch}_dw"] = f"{pct(share['depthwise conv'])} of time at {pct(dw_util)}"
    if "squeeze-excite" in by.index:
        out[f"layers_{arch}_se_share"] = pct(share["squeeze-excite"])
    return out


def group_util(flops: float, time_ms: float, layers: pd.DataFrame) -> float:
    """Utilization of a set of layers: their FLOPs over their kernel time, against the layers' peak."""
    peak_tflops = statistics.median((layers["achieved_tflops"] / layers["utilization"]).dropna())
    return flops / (time_ms * 1e-3) / (peak_tflops * 1e12) if time_ms > 0 else 0.0


# ---------------------------------------------------------------- plots


def family_colors() -> dict[str, tuple]:
    """One colour per family, fixed across plots."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {name: cmap(i) for i, name in enumerate(FAMILY_ORDER)}


def family_legend(ax, families: list[str], **kwargs) -> None:
    """A legend with one entry per family present."""
    from matplotlib.lines import Line2D

    colors = family_colors()
    handles = [Line2D([], [], color=colors[f], marker="o", linestyle="-", label=f)
               for f in FAMILY_ORDER if f in families]
    ax.legend(handles=handles, fontsize=8, **kwargs)


def batch_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(BATCHES), [str(b) for b in BATCHES])
    ax.set_xlabel("batch size (images)")


def percent_axis(ax, axis: str = "y") -> None:
    """Log-scaled percentage axis with plain-number tick labels."""
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    plain_log_ticks(ax.yaxis if axis == "y" else ax.xaxis)


def plot_util_vs_batch(df: pd.DataFrame, path: Path) -> None:
    """Utilization against batch size per model, CUDA graphs and eager side by side."""
    import matplotlib.pyplot as plt

    colors = family_colors()
    fig, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=True)
    fp16 = df[df["dtype"] == DTYPE]
    for ax, mode, style in ((axes[0], "cudagraph", "-"), (axes[1], "eager", "--")):
        for arch, rows in fp16[fp16["mode"] == mode].groupby("arch", sort=False):
            rows = rows.sort_values("batch_size")
            ax.plot(rows["batch_size"], 100 * rows["utilization"], style, marker="o", ms=3, lw=1.2,
                    color=colors[family(arch)], alpha=0.85)
        batch_axis(ax)
        percent_axis(ax)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{'CUDA graph replay' if mode == 'cudagraph' else 'eager'} ({DTYPE}, {INPUT_SIZE}×{INPUT_SIZE})")
    axes[0].set_ylabel("utilization (% of 989 TFLOP/s dense fp16 peak)")
    family_legend(axes[0], list(df["family"].unique()), loc="lower right", title="family")
    fig.suptitle("Utilization against batch size, 35 CNNs on one H200 (one line per model)")
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def label_points(ax, xs, ys, names, size: int = 7) -> None:
    """Name labels next to scatter points, moved up or down where they would overlap an earlier label
    (with a thin line back to the point when moved)."""
    fig = ax.figure
    ax.margins(x=0.1, y=0.06)  # room for the labels of the outermost points
    fig.tight_layout()  # the final layout: label positions are worked out in its pixels
    fig.canvas.draw()
    to_px, scale = ax.transData.transform, fig.dpi / 72
    placed: list[tuple[float, float, float, float]] = []
    points = sorted(zip(xs, ys, names), key=lambda p: -to_px((p[0], p[1]))[1])
    for x, y, name in points:
        px, py = to_px((x, y))
        width, height = len(name) * size * 0.6 * scale, size * 1.2 * scale
        for step in [0] + [s * k for k in range(1, 8) for s in (-1, 1)]:
            dy = 2 + step * size * 1.0
            box = (px + 4 * scale, px + 4 * scale + width, py + dy * scale, py + dy * scale + height)
            if not any(box[0] < b[1] and b[0] < box[1] and box[2] < b[3] and b[2] < box[3] for b in placed):
                break
        placed.append(box)
        arrow = dict(arrowstyle="-", lw=0.5, color="0.5") if step else None
        ax.annotate(name, (x, y), xytext=(4, dy), textcoords="offset points", fontsize=size, arrowprops=arrow)


def plain_log_ticks(axis) -> None:
    """Log-axis tick labels as plain numbers (0.1, 1, 10) instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def plot_util_vs_flops(df: pd.DataFrame, path: Path) -> None:
    """Utilization at batch 256 (CUDA graphs) against FLOPs per image, one labelled point per model."""
    import matplotlib.pyplot as plt

    colors = family_colors()
    b = select(df, "cudagraph", 256).reset_index()
    fig, ax = plt.subplots(figsize=(11, 7.5))
    ax.scatter(b["flops_per_image"] / 1e9, 100 * b["utilization"], c=[colors[f] for f in b["family"]], s=40,
               zorder=3)
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    percent_axis(ax)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("GFLOPs per image (forward pass, a multiply-add counts 2)")
    ax.set_ylabel("utilization at batch 256 (% of 989 TFLOP/s peak)")
    ax.set_title(f"Utilization against model size: batch 256, CUDA graph replay, {DTYPE}")
    family_legend(ax, list(b["family"].unique()), loc="lower right", title="family")
    label_points(ax, b["flops_per_image"] / 1e9, 100 * b["utilization"], b["arch"])
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def plot_throughput_vs_accuracy(table: pd.DataFrame, path: Path) -> None:
    """Throughput at batch 256 (CUDA graphs) against the published top-1 of the default weights."""
    import matplotlib.pyplot as plt

    colors = family_colors()
    known = table.dropna(subset=["top1_pct"])
    native = known["top1_crop_px"] == INPUT_SIZE
    fig, ax = plt.subplots(figsize=(11, 7.5))
    for mask, face in ((native, None), (~native, "none")):
        part = known[mask]
        ax.scatter(part["top1_pct"], part["throughput_b256_cudagraph_per_s"], s=45, zorder=3,
                   edgecolors=[colors[f] for f in part["family"]],
                   facecolors=face if face else [colors[f] for f in part["family"]])
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("ImageNet-1K top-1 (%) of torchvision's default weights")
    ax.set_ylabel("throughput at batch 256 (images/s, CUDA graph replay, fp16, 224×224)")
    left_out = table.loc[table["top1_pct"].isna(), "arch"]
    missing = f" (no published top-1: {', '.join(left_out)})" if len(left_out) else ""
    ax.set_title("Throughput against accuracy" + missing, fontsize=10)
    family_legend(ax, list(known["family"].unique()), loc="upper right", title="family")
    ax.text(0.01, 0.01, "hollow: top-1 published at a larger crop than the 224 px measured here",
            transform=ax.transAxes, fontsize=8)
    label_points(ax, known["top1_pct"], known["throughput_b256_cudagraph_per_s"], known["arch"])
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def plot_layers(results: Path, path: Path, top_n: int = 12) -> None:
    """Per model: share of kernel time and utilization per layer group, and the layers wasting most time."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(LAYER_MODELS), figsize=(17, 10))
    for col, arch in enumerate(LAYER_MODELS):
        layers = load_layers(results, arch)
        total = layers["time_ms"].sum()
        by = layers.groupby("group").agg(time=("time_ms", "sum"), flops=("flops_per_batch", "sum"))
        by = by[by["time"] > 0].sort_values("time")
        ax = axes[0, col]
        bars = ax.barh(by.index, 100 * by["time"] / total, color="tab:gray")
        for bar, (_, g) in zip(bars, by.iterrows()):
            util = group_util(g["flops"], g["time"], layers)
            bar.set_color("tab:blue" if g["flops"] > 0 else "tab:gray")
            ax.annotate(f"util {pct(util)}" if g["flops"] > 0 else "0 FLOPs", (bar.get_width(), bar.get_y() + 0.4),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
        ax.set_xlim(0, 100 * by["time"].max() / total * 1.35)
        ax.set_xlabel("share of kernel time (%)")
        ax.set_title(f"{arch}: {ms(total)} of kernels per batch of 64 (eager, fp16)", fontsize=10)
        worst = layers.sort_values("wasted_ms", ascending=False).head(top_n)[::-1]
        ax = axes[1, col]
        ax.barh([f"{n} [{k}]" for n, k in zip(worst["name"], worst["kind"])], worst["wasted_ms"] * 1e3,
                color=["tab:gray" if f == 0 else "tab:blue" for f in worst["flops_per_batch"]])
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("wasted time per batch (µs) = kernel time × (1 − utilization)")
        ax.set_title(f"top {top_n} layers by wasted time", fontsize=10)
    fig.suptitle("Where the time goes per layer (blue: layers with FLOPs, labelled with their utilization; "
                 "gray: layers without counted FLOPs)")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_counters(converged: pd.DataFrame, path: Path) -> None:
    """GPM counters against FLOP utilization at batch 256 (CUDA graphs): the GPU looks busy, does little."""
    import matplotlib.pyplot as plt

    b = converged
    util = 100 * b["utilization"]
    fig, ax = plt.subplots(figsize=(10, 6.5))
    for column, label, marker in (("counter_sm_activity", "SM activity", "o"),
                                  ("counter_dram_bw_util", "DRAM bandwidth utilization", "s"),
                                  ("counter_tensor_activity", "tensor-pipe activity", "^")):
        ax.scatter(util, b[column], marker=marker, s=35, label=label, zorder=3)
    line = [util.min() * 0.8, 100]
    ax.plot(line, line, "k:", lw=1, label="counter = FLOP utilization")
    percent_axis(ax, "x")
    percent_axis(ax, "y")
    ax.set_ylim(0.8, 100)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("FLOP utilization (% of 989 TFLOP/s peak)")
    ax.set_ylabel("NVML GPM counter, converged windows (%)")
    ax.set_title("Counters against FLOP utilization: 35 CNNs, batch 256, CUDA graph replay, fp16")
    ax.legend(loc="lower right", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


# ---------------------------------------------------------------- main


def write_outputs(results: Path) -> tuple[dict[str, str], pd.DataFrame]:
    """Every plot, summary.csv and summary.json into `results`."""
    import matplotlib

    matplotlib.use("Agg")
    df = load_survey(results)
    table = summary(results)
    plot_util_vs_batch(df, results / "util_vs_batch.png")
    plot_util_vs_flops(df, results / "util_vs_flops.png")
    plot_throughput_vs_accuracy(table, results / "throughput_vs_accuracy.png")
    plot_layers(results, results / "layers.png")
    plot_counters(load_counters(results), results / "counters.png")
    table.round(4).to_csv(results / "summary.csv", index=False)
    numbers = headline(results)
    (results / "summary.json").write_text(json.dumps(numbers, indent=2, ensure_ascii=False) + "\n")
    return numbers, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results",
                        help="folder with survey.csv, survey_compile.csv and layers_*.csv")
    parser.add_argument("--markdown", action="store_true", help="print the headline numbers and the results table")
    args = parser.parse_args()
    missing = [name for name in ("survey.csv", "survey_compile.csv") if not (args.results / name).is_file()]
    if missing:
        print(f"error: {args.results} lacks {', '.join(missing)} (run run.py on the GPU machine first)",
              file=sys.stderr)
        raise SystemExit(2)
    numbers, table = write_outputs(args.results)
    if args.markdown:
        for key, value in numbers.items():
            print(f"{key}: {value}")
        print()
        print(markdown_table(table))
    print(f"wrote plots, summary.csv and summary.json to {args.results}")


if __name__ == "__main__":
    main()
