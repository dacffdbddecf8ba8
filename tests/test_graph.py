"""The stage graph: declared once in stages/, checked when made, ordered deterministically."""

from __future__ import annotations

import pytest
from conftest import PINS, delete_toml, edit_toml

import stages
from rocmgraph.common.errors import GraphError, PinsError
from rocmgraph.config import pins
from rocmgraph.graph.dag import Stage, make_graph


def stage(name: str, *parents: str) -> Stage:
    return Stage(name=name, doc=name, parents=parents, recipe="base.Dockerfile.j2")


def test_a_cycle_is_an_error_that_prints_its_path() -> None:
    with pytest.raises(GraphError) as caught:
        make_graph([stage("base"), stage("a", "base", "c"), stage("b", "a"), stage("c", "b")])
    assert str(caught.value) == "stage graph has a cycle (stage -> parent): a -> c -> b -> a"


def test_an_unknown_parent_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(GraphError) as caught:
        make_graph([stage("wheels"), stage("vllm", "wheel")])
    assert str(caught.value) == (
        "stage 'vllm' names unknown parent 'wheel'; did you mean 'wheels'? "
        "known stages: vllm, wheels"
    )


def test_a_stage_declared_twice_is_an_error() -> None:
    with pytest.raises(GraphError) as caught:
        make_graph([stage("base"), stage("base")])
    assert str(caught.value) == "stage 'base' is declared twice"


def test_order_is_parents_first_and_the_same_whatever_the_declaration_order() -> None:
    declared = [stage("z", "base"), stage("a", "base"), stage("base"), stage("top", "a", "z")]
    assert make_graph(declared).order == ("base", "a", "z", "top")
    assert make_graph(reversed(declared)).order == ("base", "a", "z", "top")


def test_the_real_graph_matches_the_design() -> None:
    graph = stages.graph()
    assert graph.order == (
        "base", "rocm", "wheels",
        "aiter", "causal_conv1d", "flash_attention", "prune", "sgl_kernel", "sglang", "slim",
        "transformer_engine", "vllm", "verl", "assemble", "manifest",
    )  # fmt: skip
    arch_dependent = {s.name for s in graph if s.arch_dependent}
    assert arch_dependent == {
        "aiter", "causal_conv1d", "flash_attention", "sgl_kernel", "sglang",
        "transformer_engine", "vllm", "prune", "assemble", "manifest",
    }  # fmt: skip
    assert graph.final == "manifest"
    # Pruning depends on no source build and not on verl: a bump never prunes again, and
    # the squash (slim) lies below verl, so a verl bump never rewrites the whole image.
    assert graph.ancestors("prune") == {"base", "rocm", "wheels"}
    assert graph.ancestors("verl") == {"base", "rocm", "wheels", "slim"}
    assert graph.descendants("verl") == {"assemble", "manifest"}
    # A vLLM bump must not rebuild SGLang, and the other way round.
    assert "sglang" not in graph.descendants("vllm")
    assert "vllm" not in graph.descendants("sglang")
    # SGLang's Python and its kernels are two stages: neither rebuilds the other.
    assert (
        graph.descendants("sglang") == graph.descendants("sgl_kernel") == {"assemble", "manifest"}
    )
    assert graph.descendants("vllm") == {"assemble", "manifest"}
    assert graph.closure("vllm") == ("base", "rocm", "wheels", "vllm")


def test_every_stage_has_a_module_and_a_one_line_doc() -> None:
    for module in stages.MODULES:
        assert module.__name__ == f"stages.{module.STAGE.name}"
        assert module.STAGE.doc
        assert "\n" not in module.STAGE.doc


def checked(text: str) -> str:
    """The message Graph.check gives for pins ``text``."""
    with pytest.raises(PinsError) as caught:
        stages.graph().check(pins.loads(text))
    return str(caught.value)


def test_the_pins_of_every_profile_pass_the_graph_check() -> None:
    for name in ("pins.toml", "pins-rocm702.toml", "demo/pins.toml"):
        stages.graph().check(pins.load(str(PINS.parent / name)))


def test_a_misspelt_source_is_refused_not_left_out_of_the_image() -> None:
    text = PINS.read_text()
    misspelt = text.replace("[sources.causal_conv1d", "[sources.causal-conv1d")
    assert checked(misspelt) == (
        "pins.toml: [sources.causal-conv1d]: no stage builds a source of this name; did you "
        "mean 'causal_conv1d'? name one of: aiter, causal_conv1d, flash_attention, mbridge, "
        "sgl_kernel, sglang, torch_memory_saver, transformer_engine, triton_kernels, verl, vllm"
    )


def test_a_stage_with_one_of_its_sources_unpinned_is_refused() -> None:
    text = delete_toml(PINS.read_text(), ["sources", "torch_memory_saver"])
    assert checked(text) == (
        "pins.toml: [sources.torch_memory_saver]: is missing: stage sglang builds it with "
        "[sources.sglang]; pin it too, or remove [sources.sglang] to leave sglang out of "
        "the image"
    )


def test_only_a_stage_that_checks_a_base_image_can_be_provided() -> None:
    for name in ("assemble", "verl", "mbridge"):
        text = edit_toml(PINS.read_text(), ["base", "provides"], ["rocm", name])
        assert checked(text) == (
            f"pins.toml: [base].provides: '{name}' is not a stage a base image can provide; "
            "list only stages it carries: rocm, wheels, aiter, causal_conv1d, "
            "flash_attention, sgl_kernel, sglang, transformer_engine, vllm"
        )
