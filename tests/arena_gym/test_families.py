"""The family catalogue's aliases: the built-in ones come from the family records, a registered family's go with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arena_gym.families import (
    ModelFamily,
    canonical_family,
    family_aliases,
    get_family,
    register_family,
    unregister_family,
)
from arena_gym.types import ModelRef
from estimator.families import gpt, wide_resnet
from estimator.zoo import TransformerSpec, build_transformer


def toy(name: str = "toyalias", aliases: tuple[str, ...] = ("ta", "toy-a")) -> ModelFamily:
    return ModelFamily(
        name=name,
        kind="transformer",
        sizes={"s": TransformerSpec(f"{name}__s", 2, 32, 2)},
        build=build_transformer,
        optimizer_bytes=8,
        aliases=aliases,
    )


@pytest.fixture
def registered() -> Iterator[ModelFamily]:
    family = toy()
    register_family(family)
    yield family
    unregister_family(family.name)


def test_the_builtin_aliases_are_those_of_the_family_records() -> None:
    builtin = {alias: f.name for f in (gpt.FAMILY, wide_resnet.FAMILY) for alias in f.aliases}
    assert builtin == {"bert": "gpt", "wrn": "wide_resnet", "wresnet": "wide_resnet"}
    assert builtin.items() <= family_aliases().items()
    assert ModelRef.parse("BERT__1.3B") == ModelRef("gpt", "1.3B")
    assert ModelRef.parse("wrn__1B").name == "wide_resnet__1B"
    assert canonical_family("unknown") == "unknown" and get_family("wresnet") is wide_resnet.FAMILY


def test_a_registered_familys_aliases_resolve_until_it_is_removed(registered: ModelFamily) -> None:
    assert ModelRef.parse("ta__s").family == "toyalias" and get_family("toy-a") is registered
    register_family(registered)  # the same record again changes nothing
    assert family_aliases()["ta"] == "toyalias"
    unregister_family(registered.name)
    assert "ta" not in family_aliases() and canonical_family("ta") == "ta"
    register_family(registered)  # the fixture removes it again


def test_replacing_a_family_drops_the_aliases_it_no_longer_has(registered: ModelFamily) -> None:
    register_family(toy(aliases=("ta",)), replace=True)
    assert canonical_family("toy-a") == "toy-a" and canonical_family("ta") == "toyalias"


@pytest.mark.parametrize(
    ("family", "message"),
    [
        (toy("other", ("bert",)), "alias 'bert' already names 'gpt'"),
        (toy("other", ("moe",)), "alias 'moe' is the name of a registered family"),
        (toy("bert", ()), "model family name 'bert' is already an alias of 'gpt'"),
        (toy("other", ("Big",)), "alias 'Big' must be lower case"),
    ],
)
def test_an_alias_that_clashes_is_refused_in_one_line(family: ModelFamily, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        register_family(family)
    assert "other" not in family_aliases().values() and canonical_family("bert") == "gpt"
