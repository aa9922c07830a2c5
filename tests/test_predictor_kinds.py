"""One entry point for every predictor kind: the registry, params in every prediction, the table kind."""

from __future__ import annotations

import pytest

from nasutil import NasutilError, get_space
from nasutil.ops import network_params
from nasutil.predictor import (Candidates, Predictor, PredictTarget, make_predictor, predict_many, predictor_names,
                               register_predictor)
from nasutil.predictor.kinds.table import TablePredictor, write_table

H200 = PredictTarget("NVIDIA H200", "fp16", 256, "cudagraph")


def test_the_built_in_kinds_are_registered():
    assert {"auto", "learned", "operators", "analytical", "table"} <= set(predictor_names())
    with pytest.raises(NasutilError, match="unknown predictor 'oracle'"):
        make_predictor("oracle")


def test_every_prediction_carries_flops_and_params_of_one_op_listing():
    space = get_space("mbconv")
    archs = space.sample_many(4, seed=3)
    for kind in ("auto", "operators", "analytical"):
        predictions = predict_many("mbconv", archs, H200, predictor=kind)
        assert [p.arch for p in predictions] == [a.to_string() for a in archs]
        assert [p.params for p in predictions] == [network_params(space.operators(a)) for a in archs]
        assert all(p.latency_ms > 0 and p.flops_per_image > 0 and 0 < p.utilization < 1 for p in predictions)


def test_auto_names_the_model_it_chose_and_a_missing_model_is_refused_up_front():
    assert {p.predictor for p in predict_many("nb201", get_space("nb201").sample_many(3, 0))} == {"learned"}
    other = PredictTarget("NVIDIA H200", "bf16", 64, "eager")
    with pytest.raises(NasutilError, match="no learned model for nb201 at bf16, batch 64, eager"):
        predict_many("nb201", get_space("nb201").sample_many(1, 0), other, predictor="learned")
    p, = predict_many("nb201", get_space("nb201").sample_many(1, 0), other)
    assert p.predictor == "analytical"  # auto never refuses


class FlopsPerTeraflop(Predictor):
    """A toy kind: a millisecond per 10 GFLOPs of the batch."""

    name = "flops_per_teraflop"

    @property
    def device_name(self) -> str:
        return "NVIDIA H200"

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        return [sum(op.flops for op in ops) * target.batch_size / 1e10 for ops in candidates.ops]


def test_a_kind_of_your_own_is_one_class():
    register_predictor(FlopsPerTeraflop)
    arch = get_space("nb201").sample_many(1, 0)[0]
    p, = predict_many("nb201", [arch], predictor="flops_per_teraflop")
    assert p.predictor == "flops_per_teraflop" and p.latency_ms == pytest.approx(p.flops_per_image * 256 / 1e10)


def test_table_written_from_predictions_answers_with_them(tmp_path):
    archs = get_space("nb201").sample_many(5, seed=1)
    predictions = predict_many("nb201", archs, H200)
    path = tmp_path / "table.csv"
    with path.open("w", newline="") as out:
        write_table(out, predictions)
    table = TablePredictor(path)
    again = table.predict_many("nb201", archs, H200)
    for p, q in zip(predictions, again):
        assert q.arch == p.arch and q.params == p.params and q.flops_per_image == p.flops_per_image
        assert q.latency_ms == pytest.approx(p.latency_ms, rel=1e-5)
        assert q.utilization == pytest.approx(p.utilization, rel=1e-5) and q.predictor == "learned"
    with pytest.raises(NasutilError, match="another configuration: batch_size 256 \\(asked: 1\\)"):
        table.predict_many("nb201", archs, PredictTarget("NVIDIA H200", "fp16", 1, "cudagraph"))
    with pytest.raises(NasutilError, match="is not in the prediction table"):
        table.predict_many("nb201", get_space("nb201").sample_many(1, seed=99), H200)


def test_a_table_without_its_device_is_told_it_and_ranks_anchors_on_that_devices_profile(tmp_path):
    from nasutil.search.anchors import fast_end_ranker

    archs = get_space("nb201").sample_many(3, seed=2)
    path = tmp_path / "bare.csv"
    path.write_text("arch,latency_ms,throughput_per_s,utilization\n" + "".join(
        f"{p.arch},{p.latency_ms},{p.throughput_per_s},{p.utilization}\n" for p in predict_many("nb201", archs, H200)))
    bare, named = TablePredictor(path), TablePredictor(path, device_name="NVIDIA H200")
    assert bare.device_name == "" and fast_end_ranker(bare, "nb201", bare.target()) is bare
    assert named.device_name == "NVIDIA H200" and named.target().device_name == "NVIDIA H200"
    assert fast_end_ranker(named, "nb201", named.target()).name == "operators"
    assert {p.device_name for p in named.predict_many("nb201", archs, named.target())} == {"NVIDIA H200"}
    full = tmp_path / "full.csv"
    with full.open("w", newline="") as out:
        write_table(out, predict_many("nb201", archs, H200))
    with pytest.raises(NasutilError, match="names its device \\(NVIDIA H200\\), not device_name='NVIDIA H100'"):
        TablePredictor(full, device_name="NVIDIA H100")
    with pytest.raises(NasutilError, match="device_name must be a device's name"):
        TablePredictor(path, device_name=5)


def test_a_malformed_table_is_refused_before_any_prediction(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("arch,latency_ms,throughput_per_s,utilization\n|nope|,1,2,0.1\n")
    with pytest.raises(NasutilError, match="bad.csv:2"):
        TablePredictor(path).check("nb201", H200)
    path.write_text("arch,latency_ms\nx,1\n")
    with pytest.raises(NasutilError, match="lacks column"):
        TablePredictor(path)


def test_a_prediction_says_how_far_the_profile_trusts_it(cli):
    arch = get_space("nb201").sample_many(1, 0)
    graph, = predict_many("nb201", arch, H200)
    eager, = predict_many("nb201", arch, PredictTarget("NVIDIA H200", "fp16", 1, "eager"))
    other, = predict_many("nb201", arch, PredictTarget("NVIDIA H200", "bf16", 8, "cudagraph"))
    assert graph.expected_error is not None and eager.expected_error is not None
    assert graph.expected_error < eager.expected_error and other.expected_error is None  # analytical: unknown
    rough = cli("predict", "nb201", "--sample", "1", "--batch-size", "1", "--mode", "eager")
    calm = cli("predict", "nb201", "--sample", "1")
    assert rough.returncode == calm.returncode == 0
    assert ("treat these predictions as rough" in rough.stderr) == (eager.expected_error > 0.10)
    assert "rough" not in calm.stderr


def test_auto_names_the_settings_a_profile_serves_where_no_datasheet_backs_the_fallback():
    """A profile fitted on a device no datasheet lists (a CPU) serves only its own settings; elsewhere the
    error says so, not that a datasheet entry is missing."""
    from nasutil.errors import NasutilError
    from nasutil.predictor.kinds.auto import AutoPredictor
    from nasutil.predictor.profile import DeviceProfile

    predictor = AutoPredictor(DeviceProfile(device_name="Some CPU"))
    with pytest.raises(NasutilError, match="has no model for nb201 at fp16, batch 256, cudagraph.*no learned models"):
        predictor.check("nb201", predictor.target())
    AutoPredictor("h200").check("nb201", AutoPredictor("h200").target())  # a datasheet device: the fallback stands


def test_a_kind_made_from_a_loaded_profile_never_spells_the_profile_out(monkeypatch):
    """The auto kind makes the kind it chose for every prediction: naming the profile by its repr, which
    spells out every fitted model, made each prediction of a search pay for that text."""
    from nasutil.predictor.profile import DeviceProfile
    from nasutil.predictor.registry import open_profile

    profile = open_profile("h200")

    def refuse(self):
        raise AssertionError("the profile was spelled out")

    monkeypatch.setattr(DeviceProfile, "__repr__", refuse)
    predictor = make_predictor("auto", profile=profile)
    assert predictor.profile_label == profile.device_name
    p, = predict_many("nb201", get_space("nb201").sample_many(1, 0), H200, predictor=predictor)
    assert p.predictor == "learned" and p.latency_ms > 0


CELL_A = "|skip_connect~0|+|none~0|none~1|+|none~0|none~1|none~2|"
CELL_B = "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|"


def _one_cell_table(path, rows: list[str]) -> None:
    path.write_text("arch,latency_ms,throughput_per_s,utilization,flops_per_image,params,device_name,dtype,batch_size,"
                    "mode\n" + "".join(r + "\n" for r in rows))


@pytest.mark.parametrize("rows, message", [
    ([f"{CELL_A},1.0,256000,0.01,1,1,NVIDIA H200,fp16,256,cudagraph",
      f"{CELL_A},0.001,99999999,0.01,1,1,NVIDIA H200,fp16,256,cudagraph"], "is also on line 2, with other figures"),
    ([f"{CELL_A},1.0,256000,0.01,1,1,NVIDIA H200,fp16,256,cudagraph",
      f"{CELL_B},1.0,256000,0.01,1,1,NVIDIA H200,fp16,1,cudagraph"], "mixes configurations: batch_size 1, 256"),
    ([f"{CELL_A},-1,256000,0.01,1,1,NVIDIA H200,fp16,256,cudagraph"], "latency_ms '-1' is not a positive number"),
    ([f"{CELL_A},1.0,256000,-0.0001,1,1,NVIDIA H200,fp16,256,cudagraph"], "utilization '-0.0001' is not a non-neg"),
    ([f"{CELL_A},1.0,256000,0.01,1{'0' * 400},1,NVIDIA H200,fp16,256,cudagraph"], r"t.csv:2: cannot convert"),
])
def test_a_prediction_table_that_cannot_be_one_configurations_figures_is_refused(tmp_path, rows, message):
    """Each was accepted: the last of two rows won, a table of two batch sizes passed on its first row's,
    negative figures were scored, and a huge FLOP count overflowed with a traceback."""
    path = tmp_path / "t.csv"
    _one_cell_table(path, rows)
    with pytest.raises(NasutilError, match=message):
        TablePredictor(path).check("nb201", PredictTarget("NVIDIA H200", "fp16", 256, "cudagraph"))
