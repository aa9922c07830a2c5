"""Co-training on a CUDA device (skipped without one): steps captured in CUDA graphs compute what the
same steps compute eagerly, and candidates replayed together compute what each computes alone."""

from __future__ import annotations

import pytest
import torch

from conftest import Recorder, train_in_threads
from nasutil.registry import get_space
from nasutil.search.config import shipped

pytestmark = pytest.mark.gpu

ARCHS = ["|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
         "|nor_conv_1x1~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_3x3~1|nor_conv_1x1~2|",
         "|avg_pool_3x3~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|nor_conv_3x3~0|skip_connect~1|nor_conv_1x1~2|",
         "|skip_connect~0|+|nor_conv_1x1~0|nor_conv_3x3~1|+|avg_pool_3x3~0|nor_conv_1x1~1|nor_conv_3x3~2|"]
SETTINGS = dict(dataset="digits", epochs=3, batch_size=64, lr=0.05, device="cuda")


def test_a_graphed_step_computes_the_eager_step():
    """Same candidate, same seed: the loss curve and final accuracy of graph replays against eager steps."""
    results = {}
    for graphs in (False, True):
        trainer = shipped("trainer", "torch", **SETTINGS, graphs=graphs)
        rec = Recorder()
        res = trainer.train(get_space("nb201"), ARCHS[0], rec, trial_number=0)
        results[graphs] = (res, rec.steps)
    (eager, _), (graph, graph_curve) = results[False], results[True]
    assert [s for s, _ in graph_curve] == [1, 2, 3]
    assert graph.extra["train_loss"] == pytest.approx(eager.extra["train_loss"], rel=0.05)
    assert abs(graph.accuracy - eager.accuracy) <= 3.0, (graph.accuracy, eager.accuracy)


def test_candidates_replayed_together_compute_what_each_computes_alone():
    alone_trainer = shipped("trainer", "torch", **SETTINGS)
    alone = {n: alone_trainer.train(get_space("nb201"), arch, Recorder(), trial_number=n)
             for n, arch in enumerate(ARCHS)}
    together_trainer = shipped("trainer", "torch", **SETTINGS, population=len(ARCHS))
    together = train_in_threads(together_trainer, [(a, Recorder(), n) for n, a in enumerate(ARCHS)], timeout=600)
    assert together_trainer._population.most_together >= 2
    for n in range(len(ARCHS)):
        assert not isinstance(together[n], BaseException), together[n]
        a, t = alone[n], together[n]
        # the same kernels on other streams: equal up to cuDNN's choice of backward algorithm
        assert t.extra["train_loss"] == pytest.approx(a.extra["train_loss"], rel=1e-3), n
        assert abs(t.accuracy - a.accuracy) <= 1.0, (n, t.accuracy, a.accuracy)


def test_a_search_with_a_population_of_graphs_runs_its_budget(tmp_path):
    import optuna

    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    args = ["study_name=together-gpu", f"hydra.run.dir={run_dir}", "n_trials=8", "predictor=analytical",
            "plots=false", "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=2",
            "trainer.batch_size=64", "trainer.population=4", "trainer.device=cuda", "progress=false"]
    assert main(args) == 0
    study = optuna.load_study(study_name="together-gpu", storage=f"sqlite:///{run_dir / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 8
    # a cell whose output no working edge reaches computes zeros and scores chance (10%) however it trains
    learnable = [t for t in done if _output_reached(t.user_attrs["arch"])]
    assert learnable and all(t.user_attrs["accuracy"] > 20 for t in learnable), [
        (t.user_attrs["arch"], t.user_attrs["accuracy"]) for t in done]


def _output_reached(arch_text: str) -> bool:
    arch = get_space("nb201").parse(arch_text)
    reached = [True]
    for to in range(1, 4):
        reached.append(any(reached[frm] and arch.edge(to, frm) != "none" for frm in range(to)))
    return reached[3]


def test_graphs_on_cuda_by_default():
    trainer = shipped("trainer", "torch", dataset="digits", device="cuda")
    assert trainer.graphs and "CUDA-graph" in trainer.describe()
    assert torch.cuda.is_available()


def _fp16_cells() -> tuple[list[torch.nn.Module], list[torch.Tensor]]:
    """The four cells in eval mode, fp16, channels_last, and one batch of 8 each."""
    space = get_space("nb201")
    torch.manual_seed(0)
    models = [space.build(space.parse(a), num_classes=10).eval().cuda().half().to(memory_format=torch.channels_last)
              for a in ARCHS]
    inputs = [torch.randn(8, 3, 32, 32, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
              for _ in ARCHS]
    return models, inputs


def test_fused_cells_compute_what_each_computes_alone_on_the_gpu():
    """Different nb201 cells as one fp16 network (BatchNorm folded, one grouped kernel per layer)."""
    from nasutil.colocate import colocate

    models, inputs = _fp16_cells()
    with torch.inference_mode():
        group = colocate(models, inputs, "fused", fallback=False)
        outputs = [o.float().clone() for o in group.run()]
        alone = [m(x).float() for m, x in zip(models, inputs)]
    for out, ref in zip(outputs, alone):
        assert float((out - ref).abs().max()) <= 0.02 * float(ref.abs().max()), (out, ref)


@pytest.mark.parametrize("freezing", [False, True], ids=["weights-as-inputs", "frozen"])
def test_compiled_cells_compute_what_each_computes_alone_on_the_gpu(freezing):
    """Cells compiled by Inductor (kernels fused; frozen, BatchNorm folded too) and replayed together on streams."""
    from nasutil.colocate import colocate

    models, inputs = _fp16_cells()
    with torch.inference_mode():
        group = colocate(models, inputs, "streams", fallback=False, compiled=True, freezing=freezing)
        outputs = [o.float().clone() for o in group.run()]
        alone = [m(x).float() for m, x in zip(models, inputs)]
    assert group.compiled and group.strategy == "streams"
    for out, ref in zip(outputs, alone):
        assert float((out - ref).abs().max()) <= 0.02 * float(ref.abs().max()), (out, ref)


def test_compiled_candidates_train_together_as_alone_and_as_uncompiled():
    # one architecture, two trials (other weights, other data order): its training step compiles once
    archs = [ARCHS[0], ARCHS[0]]
    plain_trainer = shipped("trainer", "torch", **SETTINGS)
    plain = {n: plain_trainer.train(get_space("nb201"), a, Recorder(), trial_number=n) for n, a in enumerate(archs)}
    alone_trainer = shipped("trainer", "torch", **SETTINGS, compile=True)
    alone = {n: alone_trainer.train(get_space("nb201"), a, Recorder(), trial_number=n) for n, a in enumerate(archs)}
    together_trainer = shipped("trainer", "torch", **SETTINGS, compile=True, population=len(archs))
    together = train_in_threads(together_trainer, [(a, Recorder(), n) for n, a in enumerate(archs)], timeout=900)
    for n in range(len(archs)):
        assert not isinstance(together[n], BaseException), together[n]
        assert together[n].extra["train_loss"] == pytest.approx(alone[n].extra["train_loss"], rel=1e-3), n
        assert abs(together[n].accuracy - alone[n].accuracy) <= 1.0, n
        # other kernels, the same arithmetic up to rounding in bf16, which steers the two runs apart a little
        # (the last epoch's loss is a few hundredths, so the check is absolute)
        assert alone[n].extra["train_loss"] == pytest.approx(plain[n].extra["train_loss"], abs=0.03), n
        assert abs(alone[n].accuracy - plain[n].accuracy) <= 3.0, (n, alone[n].accuracy, plain[n].accuracy)
