"""`cell`: generated cell spaces. The NAS-Bench-201 preset equals the dedicated space; a YAML space with a
plugin's op samples, builds, runs, round-trips and enumerates; bad configs are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nasutil.counting import count_model
from nasutil.registry import get_space

CONFIG = """\
nodes: 2
ops: [none, skip_connect, tiny_max_pool_3x3, nor_conv_1x1]
channels: 8
stages: 2
cells_per_stage: 1
input_size: 16
in_channels: 1
"""


def test_the_nb201_preset_builds_the_nb201_networks():
    cell, nb201 = get_space("cell:nb201"), get_space("nb201")
    rng = np.random.default_rng(0)
    x = torch.randn(2, 3, 32, 32)
    for _ in range(50):
        arch = cell.sample(rng)
        same = nb201.parse(arch.to_string())
        assert cell.parse(arch.to_string()) == arch and np.array_equal(arch.encode(), same.encode())
        assert cell.operators(arch) == nb201.operators(same)
        generated, dedicated = cell.build(arch).eval(), nb201.build(same).eval()
        dedicated.load_state_dict(generated.state_dict())  # the same module names and shapes
        counts_a, counts_b = count_model(generated, 32), count_model(dedicated, 32)
        assert (counts_a.params, counts_a.flops_per_image) == (counts_b.params, counts_b.flops_per_image)
        with torch.no_grad():
            assert torch.equal(generated(x), dedicated(x))
    assert cell.size() == nb201.size() == 15_625
    first = [a.to_string() for _, a in zip(range(200), cell.enumerate())]
    assert first == [a.to_string() for _, a in zip(range(200), nb201.enumerate())]


def test_the_darts_preset_builds_the_darts_networks():
    """50 genotypes sampled by `darts`: the same strings, encodings, parameters, FLOPs, op listings and, with
    the weights copied, the same outputs from `cell:darts`."""
    cell, darts = get_space("cell:darts"), get_space("darts")
    rng = np.random.default_rng(0)
    x = torch.randn(1, 3, 16, 16)
    for n in range(50):
        dedicated_arch = darts.sample(rng)
        arch = cell.parse(dedicated_arch.to_string())
        assert arch.to_string() == dedicated_arch.to_string() and cell.parse(arch.to_string()) == arch
        assert np.array_equal(arch.encode(), dedicated_arch.encode())
        generated, dedicated = cell.build(arch).eval(), darts.build(dedicated_arch).eval()
        generated.load_state_dict(dedicated.state_dict())  # the same module names and shapes
        if n % 10 == 0:  # counting and tracing build and run the network: a few suffice
            a, b = count_model(generated, 16), count_model(dedicated, 16)
            assert (a.params, a.flops_per_image) == (b.params, b.flops_per_image)
            assert cell.operators(arch, input_size=16) == darts.operators(dedicated_arch, input_size=16)
        with torch.no_grad():
            assert torch.equal(generated(x), dedicated(x))
    assert cell.size() == darts.size() and cell.encoding_size == darts.encoding_size
    assert cell.sample(np.random.default_rng(3)).to_string() == darts.sample(np.random.default_rng(3)).to_string()


CHOSEN = """\
nodes: 3
inputs: 2
ops: [sep_conv_3x3, max_pool_3x3, skip_connect]
reduction: cell
channels: 4
layers: 3
stem_multiplier: 2
input_size: 16
in_channels: 1
"""


def test_a_yaml_darts_style_space_samples_suggests_builds_runs_and_enumerates(tmp_path):
    import itertools

    import optuna

    path = tmp_path / "chosen.yaml"
    path.write_text(CHOSEN)
    space = get_space(f"cell:{path}")
    # per node: C(i+2, 2) input pairs x 3^2 ops; over 3 nodes; squared for the normal and reduction cells
    assert space.size() == (1 * 9 * 3 * 9 * 6 * 9) ** 2
    archs = [space.sample(np.random.default_rng(seed)) for seed in range(5)]
    trial = optuna.create_study().ask()
    archs.append(space.suggest(trial))
    for arch in archs:
        assert space.parse(arch.to_string()) == arch and arch.encode().shape == (space.encoding_size,)
        net = space.build(arch).eval()
        with torch.no_grad():
            assert net(torch.zeros(2, 1, 16, 16)).shape == (2, 10)
        assert "normal_concat=[2, 3, 4]" in arch.to_string()
    first = list(itertools.islice(space.enumerate(), 50))
    assert len({a.canonical_hash() for a in first}) == 50
    preset = get_space("cell:darts").parse(get_space("darts").sample(np.random.default_rng(0)).to_string())
    assert preset.canonical_hash() != first[0].canonical_hash()


def test_an_op_without_a_stride_2_form_cannot_be_in_a_space_with_reduction_cells(cli, tmp_path, installed_plugin):
    path = tmp_path / "space.yaml"
    path.write_text("inputs: 2\nreduction: cell\nops: [sep_conv_3x3, tiny_max_pool_3x3]\n")
    result = cli("sample", f"cell:{path}", "-n", "1", env=installed_plugin)
    assert result.returncode == 2 and "has no stride-2 form" in result.stderr, result.stderr


def test_architectures_of_two_generated_spaces_never_share_a_hash(tmp_path):
    config = tmp_path / "wide.yaml"
    config.write_text("channels: 32\n")  # NAS-Bench-201's cells in a wider network
    wide, preset = get_space(f"cell:{config}"), get_space("cell:nb201")
    text = "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|avg_pool_3x3~0|nor_conv_1x1~1|nor_conv_3x3~2|"
    assert wide.parse(text).canonical_hash() != preset.parse(text).canonical_hash()
    assert preset.parse(text).canonical_hash() == preset.parse(text).canonical_hash()


def test_a_yaml_space_with_a_plugins_op_samples_builds_runs_and_enumerates(cli, tmp_path, installed_plugin):
    config = tmp_path / "tiny_cells.yaml"
    config.write_text(CONFIG)
    sampled = cli("sample", f"cell:{config}", "-n", "5", "--seed", "1", env=installed_plugin)
    assert sampled.returncode == 0, sampled.stderr
    archs = sampled.stdout.split()
    assert len(archs) == 5 and all(a.count("+") == 1 for a in archs)
    with_pool = "|tiny_max_pool_3x3~0|+|nor_conv_1x1~0|skip_connect~1|"
    described = cli("describe", f"cell:{config}", with_pool, "--json", env=installed_plugin)
    assert described.returncode == 0, described.stderr
    info = json.loads(described.stdout)
    assert info["flops_per_image"] > 0 and info["params"] > 0  # built and run on a 1x16x16 image
    code = (f"from nasutil.registry import get_space\n"
            f"space = get_space('cell:{config}')\n"
            f"archs = list(space.enumerate())\n"
            f"assert len(archs) == space.size() == 4 ** 3, len(archs)\n"
            f"assert len({{a.canonical_hash() for a in archs}}) == 64\n"
            f"assert all(space.parse(a.to_string()) == a for a in archs)\n"
            f"import torch\n"
            f"net = space.build(archs[-1]).eval()\n"
            f"assert net(torch.zeros(2, 1, 16, 16)).shape == (2, 10)\n"
            f"from collections import Counter\nfrom nasutil.op_tracing import trace_ops\n"
            f"for a in archs[::7]:\n"
            f"    assert Counter(space.operators(a)) == Counter(trace_ops(space.build(a), 16, 1)), a\n"
            f"print('ok')\n")
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, **installed_plugin})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_a_generated_space_is_predicted_from_its_op_listing(cli):
    """No profile has a learned model for a generated space: its ops are looked up in the operator tables (the
    overlap constants fitted on nb201's networks are nb201's own, so the figures agree closely, not exactly)."""
    text = "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|avg_pool_3x3~0|nor_conv_1x1~1|nor_conv_3x3~2|"
    generated = cli("predict", "cell:nb201", text, "--predictor", "operators", "--json")
    dedicated = cli("predict", "nb201", text, "--predictor", "operators", "--json")
    assert generated.returncode == 0 and dedicated.returncode == 0, generated.stderr + dedicated.stderr
    a, b = json.loads(generated.stdout), json.loads(dedicated.stdout)
    assert a["latency_ms"] == pytest.approx(b["latency_ms"], rel=0.02) and a["flops_per_image"] == b["flops_per_image"]


@pytest.mark.parametrize("config, message", [
    ("nodes: 0\n", "nodes must be a whole number from 1"),
    ("ops: [none, sep_conv_9x9]\n", "unknown cell op 'sep_conv_9x9'"),
    ("ops: [none]\n", "every cell would be degenerate"),
    ("inputs: 5\n", "inputs must be 'all'"),
    ("inputs: 2\nops: [sep_conv_3x3, skip_connect]\n", "go with reduction cells"),
    ("reduction: cell\n", "go with reduction cells"),
    ("inputs: 2\nreduction: cell\nops: [none, sep_conv_3x3]\n", "op 'none' outputs zeros"),
    ("inputs: 2\nreduction: cell\nops: [sep_conv_3x3]\nlayers: 0\n", "layers must be a whole number"),
    ("nodes: 3\nkernel: 5\n", "unknown setting 'kernel'"),
    ("stages: 6\ninput_size: 8\n", "too small for 6 stages"),
    ("- a list\n", "must be a mapping"),
    ("ops: !!python/object/apply:os.system ['true']\n", "cannot read cell space config"),
    ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nchannels: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
     "expands to more than 100,000 values"),
    ("merge: " + "[" * 5000 + "]" * 5000 + "\n", "nests deeper than 32 levels"),
    ("nodes: 2\nchannels: 8\nchannels: 16\n", "gives the key 'channels' twice in one mapping (again on line 3)"),
    ("nodes: 2\nops: [none, skip_connect\nmerge: sum\n", "expected ',' or ']', but got ':' (line 3, column 6)"),
    ("channels: 4096\nstages: 6\nnodes: 8\ncells_per_stage: 64\ninput_size: 1024\n", "parameters, over the 2e+09"),
    ("inputs: 2\nreduction: cell\nops: [sep_conv_3x3]\nchannels: 4096\nlayers: 64\nnodes: 8\n",
     "parameters, over the 2e+09"),
    # the residual reduction blocks, once left out of the bound: 4.6e9 parameters (18.5 GB) passed
    ("channels: 384\nstages: 6\nnodes: 1\ncells_per_stage: 1\n", "up to about 4.6e+09 parameters, over the 2e+09"),
    ("channels: 4096\nstages: 1\nnodes: 1\ncells_per_stage: 13\ninput_size: 1024\n",
     "channels 4096 at 1024x1024 (input_size) make feature maps of 4.3e+09 values (17 GB in fp32 for one image)"),
    ("inputs: 2\nreduction: cell\nops: [sep_conv_3x3]\nchannels: 512\nstem_multiplier: 3\ninput_size: 1024\n",
     ("channels 512 (x stem_multiplier 3, x nodes 3 or x 2 in a reduction cell) at 1024x1024 (input_size) make "
      "feature maps of 1.6e+09")),
    ("channels: 256\nstages: 1\nnodes: 8\ncells_per_stage: 64\ninput_size: 1024\n",
     ("about 3.1e+12 values (1.2e+04 GB in fp32), over the 1.7e+10 a cell space's may: channels 256 at 1024x1024 "
      "(input_size) make maps of 2.7e+08 values, and nodes 8, cells_per_stage 64 and stages 1 multiply them")),
])
def test_bad_cell_configs_are_one_line_errors(cli, tmp_path, config, message):
    path = tmp_path / "space.yaml"
    path.write_text(config)
    result = cli("sample", f"cell:{path}", "-n", "1")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_inline_settings_nested_deeply_are_refused_before_they_are_parsed(cli):
    """JSON's parser recursed into a RecursionError traceback at 3,000 levels."""
    result = cli("sample", 'cell:{"merge": ' + "[" * 3000 + "]" * 3000 + "}", "-n", "1")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert "inline cell space settings nest 3001 levels deep, deeper than the 32" in result.stderr


def _meta_params(space, num_classes: int) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in space.build(space.sample(0), num_classes=num_classes).parameters())


def _meta_forward(space, input_size: int, num_classes: int) -> tuple[int, list[int]]:
    """A sampled network built on the meta device (no memory): its parameters, and the size of every leaf
    module's output in a forward pass of one image."""
    from nasutil.counting import leaf_modules

    with torch.device("meta"):
        model = space.build(space.sample(0), num_classes=num_classes).eval()
    sizes: list[int] = []
    for _, module in leaf_modules(model):
        module.register_forward_hook(lambda m, args, out: sizes.append(out[0].numel()))
    with torch.no_grad():
        model(torch.zeros(1, 3, input_size, input_size, device="meta"))
    return sum(p.numel() for p in model.parameters()), sizes


PARAM_OPS = ("nor_conv_3x3", "nor_conv_1x1", "sep_conv_3x3", "sep_conv_5x5", "dil_conv_5x5", "skip_connect")


def test_the_parameter_bound_holds_every_network_the_builder_builds():
    """The bound counts what is built (reduction blocks and cells, preprocessing, head): networks with every edge
    the same op, built on the meta device (no memory), up to the largest the bound allows."""
    from nasutil_search_spaces.cell import CellSpace
    from nasutil_search_spaces.cell_arch import CellConfig, MAX_NETWORK_PARAMS

    configs = [CellConfig(nodes=nodes, ops=(op,), channels=channels, stages=stages, cells_per_stage=2)
               for op in PARAM_OPS for stages in (1, 3, 6) for channels in (1, 5, 16) for nodes in (1, 3)]
    configs += [CellConfig(nodes=nodes, ops=(op,), inputs=inputs, reduction="cell", channels=channels, layers=layers,
                           stem_multiplier=multiplier)
                for op in PARAM_OPS for layers in (1, 2, 5) for channels in (1, 6) for nodes, inputs in ((1, 1), (3, 2))
                for multiplier in (1, 16)]
    largest = [CellConfig(nodes=1, ops=("nor_conv_3x3",), channels=c, stages=6, cells_per_stage=1) for c in (252, 253)]
    assert largest[0].params_bound() <= MAX_NETWORK_PARAMS < largest[1].params_bound()  # the largest allowed at 6 stages
    for config in configs:
        space = CellSpace(config)
        for num_classes in (1, 1000):
            built = _meta_params(space, num_classes)
            assert built <= config.params_bound(num_classes), (config, num_classes)
    built = _meta_params(CellSpace(largest[0]), 10)  # close to the bound: a 3x3 convolution is the largest op
    assert 0.99 * largest[0].params_bound() < built <= largest[0].params_bound()


def test_the_forward_bound_holds_every_networks_feature_maps():
    """Every module's output in a forward pass of one image (on the meta device) is within `forward_values`, and
    none wider than `widest_map`."""
    from nasutil_search_spaces.cell import CellSpace
    from nasutil_search_spaces.cell_arch import CellConfig

    ops = PARAM_OPS + ("avg_pool_3x3", "max_pool_3x3")
    configs = [CellConfig(nodes=nodes, ops=(op,), channels=3, stages=stages, cells_per_stage=1, input_size=size)
               for op in ops[:5] + ("avg_pool_3x3",) for stages in (1, 3) for nodes in (1, 3) for size in (8, 12)]
    configs += [CellConfig(nodes=nodes, ops=(op,), inputs=2, reduction="cell", channels=4, layers=layers,
                           stem_multiplier=multiplier, input_size=size)
                for op in ops for layers in (1, 2, 5) for nodes in (1, 3) for multiplier in (1, 3) for size in (8, 12)]
    for config in configs:
        _, sizes = _meta_forward(CellSpace(config), config.input_size, 7)
        assert sum(sizes) <= config.forward_values(config.input_size, 7), config
        assert max(sizes) <= config.widest_map(config.input_size), config


WIDE = "tiny_wide_conv_11x11"  # the test plugin's 11x11 convolution through a hidden layer 8x as wide


@pytest.mark.parametrize("config, message", [
    ("channels: 64\nstages: 3\nnodes: 3\ncells_per_stage: 5\n",
     (f"parameters, over the 2e+09 a cell space may build: op '{WIDE}' holds 126,882,304 parameters per edge at 256 "
      "channels, more than a built-in op's 590,336")),
    ("channels: 64\nstages: 1\nnodes: 1\ncells_per_stage: 1\ninput_size: 1024\n",
     f"op '{WIDE}' at 64 channels on 1024x1024 makes feature maps of 5.4e+08 values"),
    ("channels: 16\nstages: 1\nnodes: 8\ncells_per_stage: 40\ninput_size: 256\n",
     (f"over the 1.7e+10 a cell space's may: op '{WIDE}' at 16 channels on 256x256 makes maps of 8.4e+06 values, and "
      f"nodes 8, cells_per_stage 40 and stages 1 multiply them, and op '{WIDE}' outputs 2.9e+07 values per edge at 16 "
      "channels on 256x256, more than a built-in op's 8.4e+06")),
    ("inputs: 2\nreduction: cell\nchannels: 64\nlayers: 8\nnodes: 4\n", f"op '{WIDE}' holds"),
])
def test_a_plugins_op_larger_than_the_built_in_ones_is_bounded_as_built(cli, tmp_path, installed_plugin, config,
                                                                         message):
    """A plugin's op was taken to hold no more than a 3x3 convolution and to output no more maps than the
    busiest built-in op: an 11x11 one with a wide hidden layer passed at sizes far over the limits. The same
    settings with built-in ops pass."""
    path = tmp_path / "space.yaml"
    path.write_text(config + f"ops: [nor_conv_3x3, {WIDE}]\n")
    result = cli("sample", f"cell:{path}", "-n", "1", env=installed_plugin)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    path.write_text(config + "ops: [nor_conv_3x3, sep_conv_5x5]\n")
    result = cli("sample", f"cell:{path}", "-n", "1", env=installed_plugin)
    assert result.returncode == 0, result.stderr


def test_the_bounds_hold_the_networks_built_with_a_plugins_op(installed_plugin):
    """Counted on meta-built networks, the parameters and every module's output of one image stay within the
    bounds where an edge may be a plugin's op, its stride-2 form included; the parameter bound is close."""
    from nasutil_search_spaces.cell import CellSpace
    from nasutil_search_spaces.cell_arch import CellConfig

    configs = [CellConfig(nodes=nodes, ops=ops, channels=channels, stages=stages, cells_per_stage=2, input_size=size)
               for ops in ((WIDE,), (WIDE, "tiny_max_pool_3x3")) for stages in (1, 3) for channels in (1, 6)
               for nodes in (1, 3) for size in (8, 11)]
    configs += [CellConfig(nodes=nodes, ops=(WIDE,), inputs=inputs, reduction="cell", channels=channels,
                           layers=layers, stem_multiplier=2, input_size=size)
                for layers in (1, 2, 5) for channels in (1, 6) for nodes, inputs in ((1, 1), (3, 2)) for size in (8, 11)]
    for config in configs:
        params, sizes = _meta_forward(CellSpace(config), config.input_size, 7)
        assert params <= config.params_bound(7), config
        if config.ops == (WIDE,) and not config.chosen:
            assert params > 0.9 * config.params_bound(7), config
        assert sum(sizes) <= config.forward_values(config.input_size, 7), config
        assert max(sizes) <= config.widest_map(config.input_size), config


def test_a_plugins_op_that_cannot_be_sized_is_named_in_one_line():
    """An op is sized by building it on PyTorch's meta device; one whose code cannot be is refused, named."""
    from nasutil_search_spaces.cell_arch import CellConfig

    from nasutil.cell_ops import CellOp, register_cell_op
    from nasutil.errors import NasutilError

    def build(channels):
        raise ValueError("needs real weights")

    register_cell_op(CellOp("unsizable_op", build, None, has_params=True))
    with pytest.raises(NasutilError) as error:
        CellConfig.from_dict({"ops": ["nor_conv_3x3", "unsizable_op"]}, "space.yaml")
    assert str(error.value) == ("space.yaml: cell op 'unsizable_op' could not be sized: it must be built on PyTorch's "
                                "meta device, without memory, to bound a space's networks (ValueError: needs real "
                                "weights)")


def test_a_build_is_checked_at_its_own_input_size_and_classes(cli):
    """A config checked at its input size and ten classes is built for others: checked again, unbuilt."""
    settings = 'cell:{"channels": 512, "stages": 1, "nodes": 1, "cells_per_stage": 1}'
    result = cli("describe", settings, "|nor_conv_3x3~0|", "--input-size", "1024")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert "channels 512 at 1024x1024 (input_size) make feature maps of 5.4e+08 values" in result.stderr
    result = cli("describe", settings.replace("512", "4096"), "|nor_conv_3x3~0|", "--num-classes", "1000000")
    assert result.returncode == 2 and "parameters with 1,000,000 classes, over the 2e+09" in result.stderr


def test_running_out_of_memory_while_building_is_one_line_and_exit_2(tmp_path):
    """Past the analytic bounds, a build the machine's memory cannot hold ends in one line, not a traceback."""
    import subprocess
    import sys

    code = """if True:
        import os, resource, sys
        import torch
        from nasutil.cli import main
        import nasutil_search_spaces.cell, nasutil_search_spaces.cell_network, nasutil.counting
        used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + 150 * 2 ** 20, resource.getrlimit(resource.RLIMIT_AS)[1]))
        sys.exit(main(["describe", sys.argv[1], "|nor_conv_3x3~0|", "--input-size", "8"]))
    """
    settings = 'cell:{"channels": 2048, "stages": 1, "nodes": 1, "cells_per_stage": 4, "input_size": 8}'
    run = subprocess.run([sys.executable, "-c", code, settings], capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr[-3000:]
    assert run.stderr.startswith("nasutil: error: out of memory"), run.stderr


def test_errors_of_size_are_one_line_messages():
    from nasutil.cli.hydra_app import user_error
    from nasutil.errors import resource_error

    assert "nested too deeply" in user_error(RecursionError("maximum recursion depth exceeded"))
    assert user_error(MemoryError()).startswith("out of memory (")
    assert resource_error(RuntimeError("CUDA error: an illegal memory access")) is None


def test_a_key_given_twice_is_refused_and_a_merge_may_still_override(cli, tmp_path):
    """Loaders keep the last of two equal keys silently; a merge (`<<`) is YAML's way of overriding."""
    result = cli("sample", 'cell:{"nodes": 2, "nodes": 3}', "-n", "1")
    assert result.returncode == 2 and "give the key 'nodes' twice" in result.stderr, result.stderr
    path = tmp_path / "merged.yaml"
    path.write_text("shared: &shared {nodes: 3, channels: 8}\nspace:\n  <<: *shared\n  nodes: 2\n")
    from search_spaces.cell_arch import _bounded_yaml

    assert _bounded_yaml(path.read_text(), str(path))["space"] == {"nodes": 2, "channels": 8}


def test_a_missing_or_unknown_config_is_a_one_line_error(cli, tmp_path):
    for option, message in ((f"{tmp_path}/nope.yaml", "does not exist"), ("darts9", "neither a preset")):
        result = cli("sample", f"cell:{option}", "-n", "1")
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_the_readme_example_is_the_shipped_file_and_runs():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    example = (root / "docs" / "examples" / "two_node_cells.yaml").read_text()
    body = "".join(line + "\n" for line in example.splitlines() if not line.startswith("#"))
    assert body in (root / "README.md").read_text()
    space = get_space(f"cell:{root / 'docs' / 'examples' / 'two_node_cells.yaml'}")
    arch = space.parse("|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|")
    assert space.size() == 64 and count_model(space.build(arch), 28, in_channels=1).flops_per_image > 0


def test_a_search_over_a_generated_space_set_by_hydra_overrides(tmp_path):
    import optuna

    from nasutil.cli.search_command import main

    common = [f"hydra.run.dir={tmp_path}", "search_space=cell", "trainer=torch", "trainer.epochs=1",
              "trainer.max_batches_per_epoch=2", "n_trials=3", "prune=none", "evaluator=none", "plots=false",
              "progress=false", "study_name=generated"]
    assert main(common + ["search_space.settings.nodes=2", "search_space.settings.cells_per_stage=1",
                          "search_space.settings.ops=[none,skip_connect,nor_conv_3x3]"]) == 0
    trials = optuna.load_study(study_name="generated", storage=f"sqlite:///{tmp_path}/study.db").trials
    assert len(trials) == 3 and all(t.user_attrs["arch"].count("+") == 1 for t in trials)  # two nodes
    assert main(common + ["search_space.settings.nodes=0"]) == 2


def test_isomorphic_cells_share_a_hash_and_others_do_not():
    """Renumbering intermediate nodes that no working edge orders gives the same network (sum is
    commutative): the same key. A working edge between them orders them: another key."""
    space = get_space("cell:nb201")
    a = space.parse("|nor_conv_3x3~0|+|nor_conv_1x1~0|none~1|+|skip_connect~0|avg_pool_3x3~1|nor_conv_3x3~2|")
    swapped = space.parse("|nor_conv_1x1~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2|")
    ordered = space.parse("|nor_conv_1x1~0|+|nor_conv_3x3~0|skip_connect~1|+|skip_connect~0|nor_conv_3x3~1|"
                          "avg_pool_3x3~2|")
    assert a.to_string() != swapped.to_string()
    assert a.canonical_key() == swapped.canonical_key() and a.canonical_hash() == swapped.canonical_hash()
    assert a.canonical_key() != ordered.canonical_key()
    # the two renumbered networks have the same parameters, FLOPs and op listing (as a multiset)
    ops_a, ops_b = space.operators(a), space.operators(swapped)
    assert sorted(ops_a) == sorted(ops_b)
    keys = {arch.canonical_key() for arch in space.enumerate()}
    assert len(keys) == 14_125  # of 15,625 cells: 1,500 are renumberings of another


def test_profile_build_can_time_every_op_a_generated_space_lists():
    """`nasutil profile build --spaces cell:...` times each distinct op of sampled networks through
    `op_callable`; every op of both presets' networks must make one (run here on the CPU)."""
    from nasutil.predictor.op_timing import op_callable

    for spec in ("cell:darts", "cell:nb201"):
        space = get_space(spec)
        ops = {op for arch in space.sample_many(2, seed=0) for op in space.operators(arch, input_size=16)}
        for op in ops:
            op_callable(op, 1, torch.device("cpu"), torch.float32)()


def test_a_study_over_an_edited_cell_file_is_refused_not_mixed(tmp_path, capsys):
    """Editing a cell YAML file and re-running the same command once resumed the old study, recording the
    new networks as repeats of the old ones with their accuracies."""
    import optuna

    from nasutil.cli.search_command import main

    space = tmp_path / "space.yaml"
    space.write_text("nodes: 2\ncells_per_stage: 1\nops: [none, skip_connect, nor_conv_3x3]\n")
    common = [f"hydra.run.dir={tmp_path / 'run'}", f"search_space.name=cell:{space}",
              "trainer=torch", "trainer.epochs=1", "trainer.max_batches_per_epoch=1", "prune=none", "evaluator=none",
              "plots=false", "progress=false", "study_name=edited"]
    assert main(common + ["n_trials=2"]) == 0
    assert main(common + ["n_trials=3"]) == 0  # unchanged: resumed
    space.write_text("nodes: 2\ncells_per_stage: 1\nops: [none, skip_connect, nor_conv_3x3]\nchannels: 8\n")
    assert main(common + ["n_trials=5"]) == 2
    assert "was made over another search space, or another version of it" in capsys.readouterr().err
    study = optuna.load_study(study_name="edited", storage=f"sqlite:///{tmp_path / 'run' / 'study.db'}")
    assert len(study.trials) == 3  # nothing added, nothing lost
    # a built-in space has no digest of settings: its name stands for it (nb201 and this space shared a study)
    builtin = [f"hydra.run.dir={tmp_path / 'run2'}", "plots=false", "progress=false", "study_name=mixed",
               "trainer=torch", "trainer.epochs=1", "trainer.max_batches_per_epoch=1", "prune=none", "evaluator=none"]
    assert main(builtin + ["n_trials=1"]) == 0
    assert main(builtin + ["n_trials=2", f"search_space.name=cell:{space}"]) == 2
    assert "was made over another search space, or another version of it (its settings or file changed since: " \
           "nb201 then" in capsys.readouterr().err


def test_a_cell_file_by_its_full_path_names_its_own_run_folder(tmp_path, monkeypatch, capsys):
    """`search_space.name=cell:/full/path.yaml` with the default study name was refused ("cannot name a run
    folder": the path's slashes); the folder is named by the file's name. With `search_space=cell` as well,
    whose inline settings it cannot take, it once failed with "File name too long"."""
    from nasutil.cli.search_command import main

    monkeypatch.chdir(tmp_path)
    space = tmp_path / "spaces" / "small.yaml"
    space.parent.mkdir()
    space.write_text("nodes: 2\ncells_per_stage: 1\nops: [none, skip_connect, nor_conv_3x3]\n")
    common = ["trainer=torch", "trainer.epochs=1", "trainer.max_batches_per_epoch=1", "prune=none", "evaluator=none",
              "plots=false", "progress=false", "n_trials=2"]
    assert main([f"search_space.name=cell:{space}", *common]) == 0
    [folder] = (tmp_path / "outputs").iterdir()
    assert folder.name.startswith("cell:small.yaml-tpe-none-s0-") and (folder / "study.db").exists()
    capsys.readouterr()
    assert main(["search_space=cell", "search_space.name=cell:spaces/small.yaml", "study_name=both", *common]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == ["nasutil-search: error: search_space.name=cell:spaces/small.yaml carries its own settings, and "
                     "search_space=cell adds inline ones (search_space.settings): choose the file without "
                     "search_space=cell"], error


SMALL = "nodes: 2\ncells_per_stage: 1\nops: [none, skip_connect, nor_conv_3x3]\n"
QUICK = ["trainer=torch", "trainer.epochs=1", "trainer.max_batches_per_epoch=1", "prune=none", "evaluator=none",
         "plots=false", "progress=false"]


def test_a_cell_files_default_study_follows_its_content_not_the_path_it_is_reached_by(tmp_path, monkeypatch):
    """The default study name read a cell file's path as given: the file reached by another relative path, or
    from another folder, started another study instead of resuming its own. Its content names it now."""
    from nasutil.cli.search_command import main
    from nasutil.search.config import compose

    space = tmp_path / "spaces" / "small.yaml"
    space.parent.mkdir()
    space.write_text(SMALL)
    run = [f"hydra.run.dir={tmp_path / 'run'}", *QUICK]
    names = []
    for n, (folder, spelled) in enumerate([(tmp_path, "spaces/small.yaml"), (tmp_path, "./spaces/../spaces/small.yaml"),
                                           (space.parent, "small.yaml"), (tmp_path / "run", str(space))], start=1):
        monkeypatch.chdir(folder)
        names.append(str(compose([f"search_space.name=cell:{spelled}", *QUICK]).study_name))
        assert main([f"search_space.name=cell:{spelled}", f"n_trials={n}", *run]) == 0, spelled
    assert len(set(names)) == 1 and names[0].startswith("cell:small.yaml-tpe-"), names
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["study_name"] == names[0] and summary["resumed"]
    import optuna

    assert len(optuna.load_study(study_name=names[0], storage=f"sqlite:///{tmp_path / 'run' / 'study.db'}").trials) == 4
    space.write_text(SMALL + "channels: 8\n")  # edited: another space, so another default study
    assert str(compose([f"search_space.name=cell:{space}", *QUICK]).study_name) not in names


def test_a_default_study_named_by_a_cell_files_path_is_told_of(tmp_path, monkeypatch, capsys):
    """A study made while the default name read the file's path has that name: a run of the same command
    starts a study of the new name and says how to resume the old one, which resumes by its name."""
    import optuna

    from nasutil.cli.search_command import main
    from nasutil.search.build import study_name_by_path
    from nasutil.search.config import compose

    monkeypatch.chdir(tmp_path)
    (tmp_path / "small.yaml").write_text(SMALL)
    command = ["search_space.name=cell:./small.yaml", *QUICK]
    old, new = study_name_by_path(compose(command)), str(compose(command).study_name)
    assert old is not None and old != new and old.startswith("cell:small.yaml-tpe-none-s0-")
    assert main([*command, "n_trials=1", f"study_name={old}"]) == 0  # where such a study lies: outputs/<old>
    capsys.readouterr()
    assert main([*command, "n_trials=1"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    told = (f"nasutil-search: warning: a study of this search made before a space's file named its study by its "
            f"content, not its path, is {old!r}: this run starts a new one, {new!r}; to resume that one, re-run with "
            f"study_name={old}")
    assert warned == [told], warned
    assert main([*command, "n_trials=2", f"study_name={old}"]) == 0
    storage = f"sqlite:///{tmp_path / 'outputs' / old / 'study.db'}"
    assert len(optuna.load_study(study_name=old, storage=storage).trials) == 2  # resumed, nothing lost
    capsys.readouterr()
    assert main([*command, "n_trials=2"]) == 0  # the new study holds trials now: nothing more to tell
    assert "warning" not in capsys.readouterr().err
