"""`auto`: for each space and configuration, whichever of the profile's learned model and operator table
scored the lower held-out error when the profile was fitted; else the one the profile has; else the
analytical model. It refuses a space only where that fallback would need the datasheet of a device
that none lists (a profile fitted on a CPU, at settings it was not fitted at)."""

from __future__ import annotations

from nasutil.errors import NasutilError
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.registry import Candidates, Predictor, ProfileKind, predictor_class, register_predictor


@register_predictor
class AutoPredictor(ProfileKind):
    name = "auto"

    def choice(self, space_spec: str, target: PredictTarget) -> str:
        learned = self.profile.learned_for(space_spec, target.dtype, target.batch_size, target.mode)
        model = self.profile.op_model
        has_table = model is not None and target.key in model.tables
        if learned is not None and has_table and "operators" in learned.validation:
            return "learned" if learned.validation["learned"] <= learned.validation["operators"] else "operators"
        return "learned" if learned is not None else "operators" if has_table else "analytical"

    def check(self, space_spec: str, target: PredictTarget) -> None:
        """The analytical fallback needs the device's datasheet: a profile fitted on a device that has none
        (a CPU, say) serves only the settings it was fitted at, and the error says which those are."""
        from nasutil.devices import lookup

        if self.choice(space_spec, target) != "analytical" or lookup(target.device_name) is not None:
            return
        has = sorted({f"{e.space} {e.dtype} batch {e.batch_size} {e.mode}" for e in self.profile.learned})
        raise NasutilError(f"the profile for {target.device_name!r} has no model for {space_spec} at {target.dtype}, "
                           f"batch {target.batch_size}, {target.mode}, and no datasheet gives that device's peak "
                           f"for the analytical model (the profile has: {', '.join(has) or 'no learned models'})")

    def _chosen(self, space_spec: str, target: PredictTarget) -> Predictor:
        return predictor_class(self.choice(space_spec, target))(self.profile)

    def answering(self, space_spec: str, target: PredictTarget) -> str:
        return self.choice(space_spec, target)

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        return self._chosen(candidates.space_spec, target).latencies_ms(candidates, target)
