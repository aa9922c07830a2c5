"""BENCHMARKS.md's "Kernels a training step launches" and the figures README and docs/search.md quote from it,
held to step_kernels.py's result files; and how the script names a kernel's kind."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_KERNELS = ROOT / "benchmarks" / "results" / "h100" / "step_kernels"
RUNS = ("before", "after", "before_again")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _section(title: str = "Kernels a training step launches (H100)",
             until: str = "One cast launch a step instead of two a weight (H100)") -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    start = text.index(f"### {title}")
    return text[start:text.index(f"### {until}", start)]


def _expected_table(results: dict[str, dict], named: dict[str, str]) -> list[list[str]]:
    """The section's table from the runs' result files: for each batch, each run in `named`'s order."""
    return [[label, str(row["batch"]), f"{row['census']['events_per_step']:,.1f}",
             f"{row['graph_alone']['steps_per_s']:.1f}", f"{row['graph_alone']['steps_per_s_events']:.1f}",
             f"{row['graph_together']['steps_per_s']:.1f}", f"{row['graph_together']['steps_per_s_events']:.1f}"]
            for batch in (64, 256) for name, label in named.items() for row in results[name]["rows"]
            if row["batch"] == batch]


def _results() -> dict[str, dict]:
    return {name: json.loads((STEP_KERNELS / name / "step_kernels.json").read_text()) for name in RUNS}


def _table(section: str) -> list[list[str]]:
    rows, started = [], False
    for line in section.splitlines():
        if line.startswith("| ---"):
            started = True
        elif started and line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif started:
            break
    return rows


def test_the_step_kernel_table_and_notes_are_their_result_files():
    results, section = _results(), _section()
    assert {r["device"] for r in results.values()} == {"NVIDIA H100 80GB HBM3"}
    assert len({tuple(r["archs"]) for r in results.values()}) == 1  # the same 16 cells each time
    assert _table(section) == _expected_table(results, dict(zip(RUNS, ("before", "after", "before, again"))))
    flat = _flat(section)

    before, after, again = (results[name]["rows"] for name in RUNS)
    b64 = before[0]
    assert b64["batch"] == 64 and b64["variant"] == "bf16-cl"
    kinds = b64["census"]["by_kind_per_step"]
    assert (f"at batch 64, {b64['census']['events_per_step']:.1f} kernels on average, of which BatchNorm "
            f"{kinds['batch norm']}, adds and sums {kinds['add or sum']}, convolutions {kinds['convolution']}, dtype "
            f"casts {kinds['weight or dtype cast']} (autocast's weight casts and their gradients') and ReLU "
            f"{kinds['relu']}") in flat
    alone_us = 1e6 / (b64["graph_alone"]["steps_per_s"] * b64["census"]["events_per_step"])
    assert (f"16 cells' steps ran at {b64['us_per_device_event_together']:.2f} us of device time a kernel, alone at "
            f"{alone_us:.2f}") in flat

    # the counters' kernels: one long add a BatchNorm layer, and the step's own
    counter_adds = sum(v for k, v in b64["census"]["top_names_per_step"].items() if "OnSelf_add<long>" in k)
    layers = results["before"]["batch_norm_layers_per_cell"]
    assert abs(counter_adds - (sum(layers) / len(layers) + 1)) < 0.05  # the names' counts are rounded to 0.1
    fewer_adds = b64["census"]["by_kind_per_step"]["add or sum"] - after[0]["census"]["by_kind_per_step"]["add or sum"]
    assert fewer_adds > counter_adds
    zero = results["before"]["zero_edges_per_cell"]
    assert (f"{counter_adds:.1f} kernels a step, the cells' {sum(layers) / len(layers):.1f} BatchNorm layers on "
            f"average and the step's own counter") in flat
    assert f"({sum(zero) / len(zero):.1f} such edges a network on average)" in flat

    fewer = [1 - a["census"]["events_per_step"] / b["census"]["events_per_step"] for a, b in zip(after, before)]
    assert (f"{after[0]['census']['events_per_step']:.1f} kernels a step at batch 64 and "
            f"{after[1]['census']['events_per_step']:.1f} at 256 ({min(fewer):.0%} fewer)") in flat
    assert f"{max(fewer):.0%}" == f"{min(fewer):.0%}"
    gains = [a[way]["steps_per_s"] / b[way]["steps_per_s"] for old in (before, again)
             for a, b in zip(after, old) for way in ("graph_alone", "graph_together")]
    assert f"ran {min(gains):.2f}-{max(gains):.2f}x as fast, alone and together, at both batch sizes" in flat
    between = [abs(a[way]["steps_per_s"] / b[way]["steps_per_s"] - 1) for a, b in zip(before, again)
               for way in ("graph_alone", "graph_together")]
    assert max(between) < 0.002 and "agreed with each other within 0.2%" in flat
    clocks = [abs(r[way]["steps_per_s"] / r[way]["steps_per_s_events"] - 1) for run in (before, after, again)
              for r in run for way in ("graph_alone", "graph_together")]
    assert max(clocks) < 0.001 and "Wall clock and CUDA events agree within 0.1% in every row" in flat
    assert (f"{after[0]['us_per_device_event_together']:.2f} us a kernel together at batch 64, against "
            f"{b64['us_per_device_event_together']:.2f} before") in flat

    # the other precisions: the earlier call's log, with the code before
    log = (STEP_KERNELS / "fp32_cl_misaligned.log").read_text()
    rows = {r["variant"]: r for r in map(json.loads, re.findall(r'^(\{"variant".*)$', log, re.M))}
    nchw, cl = rows["bf16-nchw"], rows["bf16-cl"]
    assert (f"({nchw['graph_alone']['steps_per_s']:.1f} and {nchw['graph_together']['steps_per_s']:.1f} steps/s alone "
            f"and together at batch 64, against {cl['graph_alone']['steps_per_s']:.1f} and "
            f"{cl['graph_together']['steps_per_s']:.1f} in the same call") in flat
    assert "CUDA error: misaligned address" in log and "misaligned address" in flat
    assert '"variant": "fp32' not in (STEP_KERNELS / "fp32_nchw_hung.log").read_text()  # it never finished one

    search = _flat((ROOT / "docs" / "search.md").read_text())
    assert f"{min(fewer):.0%} fewer kernels and {min(gains):.2f}-{max(gains):.2f}x the steps a second" in search
    readme = _flat((ROOT / "README.md").read_text())
    assert (f"A training step now launches {min(fewer):.0%} fewer kernels" in readme
            and f"{min(gains):.2f}-{max(gains):.2f}x as fast on an H100, alone and together" in readme)


def test_a_kernel_is_named_by_what_it_does():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from step_kernels import kind_of

    assert kind_of("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda") \
        == "weight or dtype cast"
    assert kind_of("void at::native::batch_norm_collect_statistics_channels_last_kernel") == "batch norm"
    assert kind_of("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc") == "convolution"
    assert kind_of("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>") \
        == "add or sum"
    assert kind_of("Memset (Device)") == "memset" and kind_of("Memcpy DtoD (Device -> Device)") == "memcpy"
    assert kind_of("void at::native::(anonymous namespace)::multi_tensor_apply_kernel") == "optimizer (foreach)"


COPIES = ("copies_before", "copies_after", "copies_before_again")


def test_the_one_cast_launch_table_and_notes_are_their_result_files():
    results = {name: json.loads((STEP_KERNELS / name / "step_kernels.json").read_text()) for name in COPIES}
    section = _section("One cast launch a step instead of two a weight (H100)",
                       "Accuracy: together against alone, Fashion-MNIST, 5 epochs")
    assert {r["device"] for r in results.values()} == {"NVIDIA H100 80GB HBM3"}
    earlier = json.loads((STEP_KERNELS / "after" / "step_kernels.json").read_text())
    assert all(r["archs"] == earlier["archs"] for r in results.values())  # the cells of the section above
    assert _table(section) == _expected_table(results, dict(zip(COPIES, ("before", "after", "before, again"))))
    flat = _flat(section)
    before, after, again = (results[name]["rows"] for name in COPIES)
    casts = [r["census"]["by_kind_per_step"]["weight or dtype cast"] for r in (before[0], after[0])]
    assert f"weight and dtype casts fell from {casts[0]} to {casts[1]} a step" in flat
    kernels = [[r["census"]["events_per_step"] for r in rows] for rows in (before, after)]
    assert (f"from {kernels[0][0]:.1f} to {kernels[1][0]:.1f} kernels at batch 64 "
            f"({1 - kernels[1][0] / kernels[0][0]:.0%} fewer) and from {kernels[0][1]:.1f} to {kernels[1][1]:.1f} at "
            f"256") in flat
    gain = {(b, way): after[i][way]["steps_per_s"] / before[i][way]["steps_per_s"]
            for i, b in enumerate((64, 256)) for way in ("graph_alone", "graph_together")}
    assert (f"at batch 64 a cell's graph alone ran {gain[64, 'graph_alone']:.2f}x as fast and 16 together "
            f"{gain[64, 'graph_together']:.2f}x; at batch 256, {gain[256, 'graph_alone']:.2f}x alone and "
            f"{gain[256, 'graph_together']:.2f}x together") in flat
    for a, b in zip(before, again):  # the two runs of the code before
        for way in ("graph_alone", "graph_together"):
            assert abs(a[way]["steps_per_s"] / b[way]["steps_per_s"] - 1) < 0.002
    for row in (*before, *after, *again):
        for way in ("graph_alone", "graph_together"):
            assert abs(row[way]["steps_per_s_events"] / row[way]["steps_per_s"] - 1) < 0.001
    assert (f"the kernels left took {after[0]['us_per_device_event_together']:.2f} us of device time each at batch 64, "
            f"against {before[0]['us_per_device_event_together']:.2f} before") in flat
    assert (f"(alone {gain[64, 'graph_alone']:.2f}x, together {gain[64, 'graph_together']:.2f}x at batch 64)") in flat


def test_the_fp16_note_is_its_log():
    """The fp16 variant's call: bf16-cl's figures as measured, then the misaligned address in the fp16 step."""
    log = (STEP_KERNELS / "half" / "half.log").read_text()
    first = json.loads(next(line for line in log.splitlines() if line.startswith('{"variant"')))
    assert first["variant"] == "bf16-cl" and first["batch"] == 64
    assert 'variant": "fp16-cl' not in log  # it never finished a measurement
    assert "CUDA error: misaligned address" in log and "_conv_forward" in log
    flat = _flat(_section())
    assert (f"measured bf16-cl at batch 64 as before ({first['graph_alone']['steps_per_s']:.1f} steps/s alone, "
            f"{first['graph_together']['steps_per_s']:.1f} together)") in flat
