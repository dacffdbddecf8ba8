"""The stage graph: declared once in stages/, checked when made, ordered deterministically."""

from __future__ import annotations

import pytest

import stages
from rocmgraph.errors import GraphError
from rocmgraph.graph import Stage, make_graph


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
