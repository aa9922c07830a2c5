"""The search's config idiom: each group names its class or factory by `_target_` and Hydra instantiates it.

Also here: the `${nasutil.digest:...}` and `${nasutil.space_key:...}` resolvers the default study name uses,
and the check that the predictor and the evaluator were given one hardware target.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import re
import warnings
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nasutil.errors import NasutilDeprecation, NasutilError, did_you_mean

#: how a target is declared: `target` in conf/config.yaml, interpolated into the predictor and the evaluator
TARGET_KEYS = ("dtype", "batch_size", "mode")
#: keys of a group that label it (study name, summary) and are not constructor arguments
LABEL_KEYS = ("name",)


def config_digest(*nodes: Any) -> str:
    """Eight hex digits that change with any setting of the given config nodes: the default study name
    carries it, so re-running the same search resumes it and changing how it searches starts anew."""
    plain = [OmegaConf.to_container(n, resolve=True) if OmegaConf.is_config(n) else n for n in nodes]
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:8]


OmegaConf.register_new_resolver("nasutil.digest", config_digest, replace=True)


#: settings of the Pareto cut added after studies were named by the digest, at the value those studies ran with
PARETO_HALVING_CLASS = "nasutil.search.halving.ParetoHalving"
PARETO_UNNAMED_DEFAULTS = {"select": "fronts"}


def halving_suffix(node: Any) -> str:
    """The default study name's ending for the `halving` group: nothing where it is off (so names made
    before the group existed still resume), `-h` and a digest of its settings where it is on (an option,
    or a class of the user's own). A Pareto cut's setting at the value it had before the setting existed
    (`PARETO_UNNAMED_DEFAULTS`) is left out, so such a study resumes under its name; another value names
    another study."""
    plain_node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain_node, dict) or (plain_node.get("name", "none") == "none" and "_target_" not in plain_node):
        return ""
    if plain_node.get("_target_") == PARETO_HALVING_CLASS:
        plain_node = without_unnamed_defaults(plain_node, PARETO_UNNAMED_DEFAULTS)
    return f"-h{config_digest(plain_node)}"


OmegaConf.register_new_resolver("nasutil.halving_suffix", halving_suffix, replace=True)


def without_unnamed_defaults(node: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`node` less the settings that hold the value studies ran with before the setting existed (`defaults`):
    left out of a default study name's digest, such a study keeps its name."""
    return {k: v for k, v in node.items() if not (k in defaults and defaults[k] == v)}


def anchors_suffix(count: Any) -> str:
    """The default study name's ending for `anchors`: nothing for none (names made before anchors existed
    still resume), `-aK` for K. Anchors are trained first in a new study only, so a resumed study would
    leave them out without a word; another count is another study."""
    return f"-a{count}" if count not in (0, None, "0") else ""


OmegaConf.register_new_resolver("nasutil.anchors_suffix", anchors_suffix, replace=True)


def folder_name(name: Any) -> str:
    """A study name as one folder under the output root: never a path that leads elsewhere."""
    text = str(name)
    if not text.strip() or text.startswith((".", "~")) or any(c in text for c in ("/", "\\", "\0")):
        raise NasutilError(f"study_name {text!r} cannot name a run folder: use letters, digits, '-', '_' and '.', "
                           f"not starting with '.' (or set hydra.run.dir)")
    return text


OmegaConf.register_new_resolver("nasutil.folder", folder_name, replace=True)


def space_label(name: Any) -> str:
    """A space's name as the default study name begins: a file's path (`cell:/data/space.yaml`) shortened
    to its file name (`cell:space.yaml`), so that the study can name a run folder; other names unchanged,
    so that the studies made with them still resume."""
    text = str(name)
    prefix, sep, rest = text.partition(":")
    if sep and ("/" in rest or "\\" in rest):
        return f"{prefix}:{rest.replace(chr(92), '/').rstrip('/').rsplit('/', 1)[-1]}"
    return text


OmegaConf.register_new_resolver("nasutil.label", space_label, replace=True)


def space_key(node: Any) -> Any:
    """The `search_space` group as the default study name's digest reads it: a space defined by a file
    (`cell:FILE.yaml`) by its file's name and the digest of what it defines, so that the file reached by
    another path, or from another folder, names the same study and an edited one another; any other space
    as configured, so that the names of its studies stay as they were. A file that cannot be read is left
    to the search, which names the problem in its own words."""
    spec = file_space(node)
    if spec is None:
        return node
    try:
        from nasutil.registry import get_space

        fingerprint = get_space(spec).fingerprint
    except Exception:  # noqa: BLE001 - the search reports it where it loads the space
        return node
    return node if fingerprint is None else {"name": space_label(spec), "fingerprint": fingerprint}


#: `dominated_throughput`'s settings that act only with halving (judging at its first rung): without it they
#: change nothing (`fidelity=rung` without halving is refused)
HALVING_PRUNE_KEYS = ("fidelity", "rung_min_neighbours", "rung_band")
HALVING_PRUNE_CLASS = "nasutil.search.prune.DominatedThroughput"


def prune_key(node: Any, halving: Any) -> Any:
    """The `prune` group as the default study name's digest reads it: without halving, the settings that
    act only at halving's rungs are left out, so a study named before they existed resumes under the same
    name (it searches as it did); with halving they are read, since they change which candidates train."""
    plain_node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain_node, dict) or plain_node.get("_target_") != HALVING_PRUNE_CLASS or halving_suffix(halving):
        return node  # a class of the user's own may mean anything by these keys
    return {k: v for k, v in plain_node.items() if k not in HALVING_PRUNE_KEYS}


OmegaConf.register_new_resolver("nasutil.prune_key", prune_key, replace=True)


#: the evaluator group's settings that leave the default study name alone: added after studies were named by
#: its digest, they change how a figure is read, not which candidates are proposed or trained (`evaluator_key`)
EVALUATOR_UNNAMED_KEYS = ("settle",)
EVALUATOR_CLASS = "nasutil.search.measurer.optional_measurer"


def evaluator_key(node: Any) -> Any:
    """The `evaluator` group as the default study name's digest reads it: `settle` is left out, so a study named
    before the option existed resumes under the same name, whatever the group's file sets it to (each measured
    figure records how it was measured: `summary.json`'s `hardware`)."""
    plain_node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain_node, dict) or plain_node.get("_target_") != EVALUATOR_CLASS:
        return node
    return {k: v for k, v in plain_node.items() if k not in EVALUATOR_UNNAMED_KEYS}


OmegaConf.register_new_resolver("nasutil.evaluator_key", evaluator_key, replace=True)


#: the torch trainer's settings added after studies were named by its digest, at the value those studies ran
#: with: at that value a setting is left out of the default study name, so such a study resumes under its name
#: (`trainer_key`); another value names another study
TRAINER_UNNAMED_DEFAULTS = {"finish_together": False, "rung_valid_images": None}
TORCH_TRAINER_CLASS = "nasutil.search.trainers.torch_trainer.TorchTrainer"


def trainer_key(node: Any) -> Any:
    """The `trainer` group as the default study name's digest reads it: the torch trainer's settings at their
    value from before they existed (`TRAINER_UNNAMED_DEFAULTS`) are left out."""
    plain_node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain_node, dict) or plain_node.get("_target_") != TORCH_TRAINER_CLASS:
        return node
    return without_unnamed_defaults(plain_node, TRAINER_UNNAMED_DEFAULTS)


OmegaConf.register_new_resolver("nasutil.trainer_key", trainer_key, replace=True)


def file_space(node: Any) -> str | None:
    """The `NAME:OPTION` of a space whose option names a file (its `option_version` tells), configured by its
    name alone; None for any other."""
    plain_node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain_node, dict) or set(plain_node) != {"name"}:
        return None
    spec = str(plain_node["name"]).strip()
    name, sep, option = spec.partition(":")
    if not sep:
        return None
    try:
        from nasutil.registry import space_class

        return spec if space_class(name).option_version(option) is not None else None
    except Exception:  # noqa: BLE001 - an unknown space or a plugin that fails: the search names it
        return None


OmegaConf.register_new_resolver("nasutil.space_key", space_key, replace=True)


def plain(node: Any) -> dict[str, Any]:
    """A config node as a plain dict, interpolations resolved."""
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}  # type: ignore[return-value]


def positive_int(cfg: DictConfig, key: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NasutilError(f"{key} must be a positive integer, got {value!r}")
    return value


def refuse_unknown_keys(node: Any, group: str, known: Sequence[str], note: str = "") -> None:
    """A key of a group whose settings nasutil reads itself (not a class's constructor arguments) that it does
    not know is refused, naming the closest known one: `+objectives.metircs=[accuracy]`, the form Hydra's own
    hint gives a misspelt key, once ran with the key ignored."""
    names = sorted(known)
    for key in node:
        if key in names:
            continue
        hint = did_you_mean([str(key)], names, prefix=f"{group}.")
        raise NasutilError(f"{group}: unknown setting {str(key)!r}{hint} (known: {', '.join(names)}"
                           f"{'; ' + note if note else ''})")


def switched_off(node: dict[str, Any], group: str) -> bool:
    """Whether an optional part (`halving`, `early_stopping`) is off: its option `none`, and no class of the
    user's own given (`+halving._target_=...`). Settings given to a part that is off would be ignored: refused."""
    if node.get("name", "none") != "none" or "_target_" in node:
        return False
    given = sorted(str(k) for k in node if k not in LABEL_KEYS)
    if given:
        options = ", ".join(f"{group}={o}" for o in _options(group) if o != "none")
        raise NasutilError(f"{group}=none is off and reads no {', '.join(given)}: choose an option that takes "
                           f"{'it' if len(given) == 1 else 'them'} ({options}), or a class of your own with "
                           f"+{group}._target_=...")
    return True


def _options(group: str) -> list[str]:
    """The shipped options of a config group."""
    import importlib.resources

    folder = importlib.resources.files("nasutil_conf").joinpath(group)
    return sorted(f.name[:-5] for f in folder.iterdir() if f.name.endswith(".yaml"))


def instantiate_group(node: dict[str, Any], group: str, **extra: Any) -> Any:
    """The object a config group's `_target_` names, built with the node's other keys. `extra` keywords
    (a seed, say) go only to targets that accept them; an option the target does not take is a one-line
    error naming what it takes, the closest of them, and the shipped option that has it where one does."""
    from hydra.utils import get_object, instantiate

    params = {k: v for k, v in node.items() if k not in LABEL_KEYS}
    label = node.get("name")
    if isinstance(label, str) and ":" in label:  # the old form names the class: it wins over the option's own
        warnings.warn(f"{group}.name={label} is deprecated: name the class with {group}._target_="
                      f"{label.replace(':', '.')}", NasutilDeprecation, stacklevel=2)
        params["_target_"] = label.replace(":", ".")
    if "_target_" not in params:
        raise NasutilError(f"{group} config needs a _target_ (the class or function that makes it)")
    check_numbers(params, group)
    chosen = _chosen_option(group, label)
    if chosen is not None:  # a class of the user's own (or a plugin's, or another option's) set over an option
        own = params["_target_"] != _shipped_target(group, chosen)
    else:
        own = params["_target_"] not in {_shipped_target(group, o) for o in _options(group)}
    what = f"{group}._target_={params['_target_']}" if own else f"{group} {chosen or label or params['_target_']!r}"
    try:
        hydra_log = logging.getLogger("hydra.utils")  # it logs the failure on stdout before raising it
        level = hydra_log.level
        hydra_log.setLevel(logging.CRITICAL)
        try:
            target = get_object(params["_target_"])
        finally:
            hydra_log.setLevel(level)
    except Exception as exc:
        cause = exc.__cause__ or exc  # Hydra's own first line ("Error loading 'x':") says nothing of why
        raise NasutilError(f"cannot import {what}: {type(cause).__name__}: {_first_line(cause)} (a module of "
                           f"your own must be importable: installed, or in the folder the command runs from)"
                           ) from None
    accepted = _parameters(target)
    if accepted is not None:
        unknown = sorted(k for k in params if not k.startswith("_") and k not in accepted)
        if unknown:
            holders = _holders(group, unknown)
            misspelt = [k for k in unknown if not any(k in keys for keys in holders.values())]
            raise NasutilError(f"{what} takes no option {', '.join(unknown)}"
                               f"{did_you_mean(unknown, accepted, f'{group}.', misspelt)} "
                               f"(takes: {', '.join(sorted(accepted)) or 'none'}"
                               f"{_where_options_come_from(group, holders, unknown, chosen, params['_target_'])})")
        extra = {k: v for k, v in extra.items() if k in accepted}
        _check_whole_numbers(target, params, group)
    try:
        return instantiate(params, **extra)
    except Exception as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, NasutilError):
            raise cause from None
        raise NasutilError(f"cannot create {what}: {_first_line(cause)}") from None


def check_numbers(node: Any, where: str) -> None:
    """No setting of a group is NaN, at any depth: every comparison with it is false, so a policy or a
    sampler handed one quietly stops doing its job (prune.band=nan once turned pruning off)."""
    if isinstance(node, float) and math.isnan(node):
        raise NasutilError(f"{where} must be a number, got nan")
    if isinstance(node, dict):
        for key, value in node.items():
            check_numbers(value, f"{where}.{key}")
    elif isinstance(node, (list, tuple)):
        for value in node:
            check_numbers(value, where)


#: annotations (as written, for modules with postponed annotations) of a setting that counts something
WHOLE_NUMBER_TYPES = frozenset({"int", "int | None", "Optional[int]", "None | int"})


def _check_whole_numbers(target: Any, params: dict[str, Any], group: str) -> None:
    """A setting declared as a whole number given as 2.5 (or true) is refused, not cut down to 2 somewhere
    inside the class; one declared as a number given as true or false (prune.threshold=true pruned
    everything below a utilization of 1.0), and one declared true or false given anything else, are
    refused too; where the target declares no types nothing is checked here."""
    try:
        declared = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return
    for name, value in params.items():
        parameter = declared.get(name)
        if parameter is None or value is None:
            continue
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        if isinstance(value, bool) and ("float" in text or annotation is float):  # true once read as 1.0
            raise NasutilError(f"{group}.{name} must be a number, got {value!r}")
        if (text == "bool" or annotation is bool) and not isinstance(value, bool):  # 'maybe' was read as true
            raise NasutilError(f"{group}.{name} must be true or false, got {value!r}")
        if text.replace("typing.", "") not in WHOLE_NUMBER_TYPES and annotation is not int:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value):
            raise NasutilError(f"{group}.{name} must be a whole number, got {value!r}")


def one_line(exc: BaseException) -> str:
    """A Hydra/OmegaConf message on one line: 'Could not find 'sampler/foo' (available: nsga2, random)'."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    head, rest = lines[0], lines[1:]
    if rest and rest[0].startswith("Available options"):
        options = []
        for line in rest[1:]:
            if line.endswith(":"):  # the next part of Hydra's message (its config search path): not options
                break
            options.append(line)
        message = f"{head} ({rest[0].rstrip(':').lower()}: {', '.join(options)})"
        return _space_option_hint(head) or message + _unknown_space_hint(head)
    return " ".join(lines)


def _space_option_hint(head: str) -> str | None:
    """The one line for `search_space=cell:FILE.yaml` (or any `SPACE:OPTION`): a path is no option of a
    config group, and the space is chosen by name instead; None for any other message."""
    found = re.search(r"'search_space/([^'/:]+:[^']*)'", head)
    if found is None:
        return None
    return (f"search_space={found.group(1)}: a space with an option (a cell file) is chosen by name, not as an "
            f"option of the search_space group: search_space.name={found.group(1)}")


def _unknown_space_hint(head: str) -> str:
    """What follows Hydra's list of `search_space` options for a name that is neither shipped nor
    registered: where a space of one's own comes from."""
    if "'search_space/" not in head:
        return ""
    return ("; search_space=NAME takes a shipped or registered space (a plugin's once its package is installed: "
            "`nasutil spaces` lists them); a cell file is chosen by name: search_space.name=cell:FILE.yaml")


#: a space name that can be a config group option (not a path, not `SPACE:OPTION`)
OPTION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: the `search_space` options this process stored in Hydra's ConfigStore for registered spaces
_STORED_SPACES: set[str] = set()


def store_registered_spaces() -> None:
    """Make every registered space that ships no config file (a plugin's, one registered at run time) an
    option of the `search_space` group, as the shipped ones are, so that `search_space=NAME` chooses it
    (it was refused, and only `search_space.name=NAME` worked). Called before a config is composed; an
    option stored earlier for a space no longer registered is taken back. Loads no plugin."""
    from hydra.core.config_store import ConfigStore

    from nasutil.registry import SPACES

    shipped = set(_options("search_space"))
    wanted = {name for name in SPACES.origins() if name not in shipped and OPTION_NAME.fullmatch(name)}
    store = ConfigStore.instance()
    for name in _STORED_SPACES - wanted:
        store.repo.get("search_space", {}).pop(f"{name}.yaml", None)
    for name in sorted(wanted):
        store.store(group="search_space", name=name, node={"name": name}, provider="nasutil")
    _STORED_SPACES.clear()
    _STORED_SPACES.update(wanted)



def _chosen_option(group: str, label: Any) -> str | None:
    """The shipped option a group's node was composed from: Hydra's record of the choice inside a run, else
    the node's `name` where it names an option (evaluator and storage options carry no name); None where
    neither tells."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get(group)
        if isinstance(choice, str) and _has_option(group, choice):
            return choice
    return label if isinstance(label, str) and label and "/" not in label and _has_option(group, label) else None


def _option_keys(group: str, option: str) -> set[str]:
    """The settings the shipped option `group=option` gives its target."""
    import importlib.resources

    node = OmegaConf.create(importlib.resources.files("nasutil_conf").joinpath(group, f"{option}.yaml").read_text())
    return {str(k) for k in node if k not in ("defaults", "_target_", *LABEL_KEYS)} if isinstance(node, DictConfig) \
        else set()


def _holders(group: str, unknown: Sequence[str]) -> dict[str, set[str]]:
    """Each shipped option of a group, with those of the given settings it has: a setting some option has
    is no typo, and that option is where it belongs or where it came from."""
    return {o: _option_keys(group, o) & set(unknown) for o in _options(group)}


def _where_options_come_from(group: str, holders: dict[str, set[str]], unknown: Sequence[str], chosen: str | None,
                             target: str) -> str:
    """Where options a target does not take come from, for the end of its error (`; ...`), "" where no shipped
    option of the group has them (a misspelt key). Options that came with the option the node was composed
    from (a class of one's own set over it) are named with an option to start from instead; ones that another
    option has (added with `+`) are named with that option, the one that reads them."""
    carried = [k for k in unknown if any(k in keys for keys in holders.values())]
    if not carried:
        return ""
    subject = ("it" if len(carried) == 1 else "they") if len(carried) == len(unknown) else ", ".join(carried)
    verb = "comes" if len(carried) == 1 else "come"
    if chosen is not None and set(carried) <= holders.get(chosen, set()):
        return f"; {subject} {verb} with {group}={chosen}: {_start_instead(group, holders, carried, target)}"
    by_options: dict[tuple[str, ...], list[str]] = {}
    for key in carried:
        by_options.setdefault(tuple(o for o in holders if key in holders[o]), []).append(key)
    if len(by_options) == 1:
        return f"; {subject} {verb} with {_joined(group, next(iter(by_options)))}"
    parts = [f"{', '.join(keys)} {'comes' if len(keys) == 1 else 'come'} with {_joined(group, options)}"
             for options, keys in by_options.items()]
    return "; " + "; ".join(parts)


def _start_instead(group: str, holders: dict[str, set[str]], carried: list[str], target: str) -> str:
    """What to do with settings a class set over an option came with: start from an option without them (one
    that makes the same target first, then `none`), or, where every option has them, remove them."""
    pronoun = "it" if len(carried) == 1 else "them"
    without = sorted((o for o in holders if not holders[o]),
                     key=lambda o: (_shipped_target(group, o) != target, o != "none", o))
    if without:
        return f"start from one without {pronoun}, such as {group}={without[0]}"
    return f"remove {pronoun} with {' '.join(f'~{group}.{k}' for k in carried)}"


def _joined(group: str, options: Sequence[str]) -> str:
    """`evaluator=auto, evaluator=cpu or evaluator=none`: the options a user may choose between."""
    named = [f"{group}={o}" for o in options]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"


def _has_option(group: str, option: str) -> bool:
    import importlib.resources

    return importlib.resources.files("nasutil_conf").joinpath(group, f"{option}.yaml").is_file()


def _shipped_target(group: str, option: Any) -> str | None:
    """The `_target_` the shipped option `group=option` declares (None where no such option ships)."""
    import importlib.resources

    if not isinstance(option, str) or not option or "/" in option or not _has_option(group, option):
        return None
    node = OmegaConf.create(importlib.resources.files("nasutil_conf").joinpath(group, f"{option}.yaml").read_text())
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    return str(target) if target is not None else None


def _parameters(target: Any) -> set[str] | None:
    """Keyword parameters a class or function takes; None if it takes any (**kwargs) or cannot be told."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    return {name for name, p in signature.parameters.items()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def split_target(node: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A predictor node split into its hardware target (dtype, batch size, mode) and the rest."""
    return {k: node[k] for k in TARGET_KEYS if k in node}, {k: v for k, v in node.items() if k not in TARGET_KEYS}


def check_one_target(predicted: dict[str, Any], evaluator: dict[str, Any]) -> None:
    """Predicted and measured figures must describe one configuration: they meet in one study (pruned
    trials carry predictions, trained ones measurements)."""
    if evaluator.get("measure", "auto") is False:
        return
    differ = [k for k in TARGET_KEYS if k in predicted and k in evaluator and predicted[k] != evaluator[k]]
    if differ:
        show = ", ".join(f"{k} {predicted[k]} predicted vs {evaluator[k]} measured" for k in differ)
        raise NasutilError(f"the predictor and the evaluator were given different targets ({show}): set it once "
                           f"with target.{differ[0]}=..., or evaluator=none to use predictions only")


def shipped_keys() -> set[str]:
    """The top-level settings and config groups of the shipped `config.yaml`, as a user can set them."""
    import importlib.resources

    text = importlib.resources.files("nasutil_conf").joinpath("config.yaml").read_text()
    node = OmegaConf.create(text)
    groups = set()
    for entry in node.get("defaults", []):
        if isinstance(entry, str):
            groups.add(entry)
        else:
            groups.update(str(k).split("@", 1)[0].split("/")[-1] for k in entry)
    return {str(k) for k in node if k != "defaults"} | groups - {"_self_"}


def refuse_added_keys(overrides: list[str]) -> None:
    """`+key=value` adds a key Hydra did not know, which is how Hydra's own hint answers a typo
    (`n_trails=5`): nasutil reads no such key, so the search would run as if the setting were not
    there. Any key a `+` override adds outside the shipped settings is refused, naming the closest one."""
    known = shipped_keys()
    for override in overrides:
        if not override.startswith("+") or override.startswith("++"):
            continue
        key = override[1:].split("=", 1)[0].strip()
        top = key.split(".", 1)[0].split("@", 1)[0]
        if top in known:
            continue  # a setting or group it has; inside a group, its reader or its class names what it does not know
        raise NasutilError(f"{override}: nasutil-search has no setting {top!r}{did_you_mean([top], known)} (a '+' "
                           f"override adds a key that nothing reads, so the search would run without it)")


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The config `nasutil-search OVERRIDES` runs with, composed from the shipped groups (for use from Python;
    nodes that read Hydra's run folder, such as `storage`, resolve only inside a run)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        raise NasutilError(f"compose takes a list of overrides such as ['n_trials=5'], got {overrides!r}")
    refuse_added_keys(list(overrides))
    store_registered_spaces()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("nasutil_conf", version_base="1.3"):
            return hydra_compose("config", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:  # several lines: the CLI's one line instead
        raise NasutilError(one_line(exc)) from None


def shipped(group: str, option: str, **overrides: Any) -> Any:
    """The object a shipped config option makes, with some of its settings overridden: for example
    `shipped("prune", "utilization_quantile", quantile=0.3)`."""
    node = {**plain(compose([f"{group}={option}"])[group]), **overrides}
    return instantiate_group(node, group)
