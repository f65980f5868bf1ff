"""`--model gguf:PATH` before any model runs: a missing file or a missing extra is a plain error,
exit 2, with the fix named and nothing written (the real model file runs in tests/real_model)."""

import sys

import pytest

from tests.helpers import turn_record, write_jsonl


def test_a_missing_model_file_is_named_with_exit_2_and_no_output(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y")])
    result = run_flowrate("eval", "c.jsonl", "--model", "gguf:/nowhere/model.gguf", "-o", "out.jsonl")
    assert result.returncode == 2
    assert "/nowhere/model.gguf: no such model file" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_directory_given_as_the_model_file_is_named_as_a_directory(run_flowrate, tmp_path):
    (tmp_path / "models").mkdir()
    write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y")])
    result = run_flowrate("eval", "c.jsonl", "--model", f"gguf:{tmp_path / 'models'}", "-o", "out.jsonl")
    assert result.returncode == 2
    assert f"{tmp_path / 'models'}: is a directory, not a model file (--model gguf:PATH names a .gguf file)" in (
        result.stderr
    )
    assert "no such model file" not in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("model", ["gguf:", "gguf:  "])
def test_gguf_with_no_path_names_the_option_not_the_current_directory(run_flowrate, tmp_path, model):
    write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y")])
    result = run_flowrate("eval", "c.jsonl", "--model", model, "-o", "out.jsonl")
    assert result.returncode == 2
    assert "--model gguf: names no model file: give its path, --model gguf:PATH" in result.stderr
    assert ".: no such model file" not in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_without_the_local_extra_the_error_says_how_to_install_it(run_flowrate, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y")])
    result = run_flowrate("eval", "c.jsonl", "--model", "gguf:model.gguf", "-o", "out.jsonl")
    assert result.returncode == 2
    assert "pip install 'flowrate[local]'" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_file_llama_cpp_cannot_load_is_a_plain_error(run_flowrate, tmp_path):
    pytest.importorskip("llama_cpp", reason="the flowrate[local] extra is not installed")
    (tmp_path / "model.gguf").write_bytes(b"not a model")
    write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y")])
    result = run_flowrate("eval", "c.jsonl", "--model", "gguf:model.gguf", "-o", "out.jsonl")
    assert result.returncode == 2
    assert "model.gguf: llama-cpp-python cannot load it" in result.stderr
