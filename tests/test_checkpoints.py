"""Loading checkpoints: both published layouts, tied heads, shards, and clear errors for broken folders."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from checkpoints import build_checkpoint, to_original_layout
from reference import reference_generate, reference_inputs
from safetensors.torch import load_file, save_file
from conftest import tone_clip as clip

import engine
from engine.errors import CheckpointError

OTHER_DIMS = dict(
    encoder=dict(d_model=48, encoder_layers=3, encoder_attention_heads=3, encoder_ffn_dim=96,
                 downsample_hidden_size=16, n_window=50, n_window_infer=400),
    text=dict(hidden_size=96, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=3,
              head_dim=24, intermediate_size=160, rope_theta=10_000.0),
)


def copy_dir(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_both_layouts_give_identical_tokens(tiny_model_dir, tiny_original_dir):
    hf, original = engine.load(tiny_model_dir, dtype="float32"), engine.load(tiny_original_dir, dtype="float32")
    assert original.config.layout == "original" and hf.config.layout == "hf"
    clips = [clip(s, 7) for s in (1.5, 9.0)]
    assert hf.generate(clips, max_new_tokens=16) == original.generate(clips, max_new_tokens=16)


@pytest.mark.parametrize("layout", ["hf", "original"])
def test_independent_checkpoint_matches_transformers(tmp_path, layout):
    """Other dimensions (a 4 s attention window, 6 heads), another seed, either layout."""
    hf_dir = build_checkpoint(tmp_path / "hf", seed=99, dims=OTHER_DIMS)
    model_dir = hf_dir if layout == "hf" else to_original_layout(hf_dir, tmp_path / "orig")
    eng = engine.load(model_dir, dtype="float32")
    for seconds in (0.7, 4.3, 12.0):
        audio = clip(seconds, 123)
        assert eng.generate([audio], max_new_tokens=20)[0] == reference_generate(hf_dir, audio, max_new_tokens=20)


def test_tied_embedding_checkpoint(tmp_path):
    model_dir = build_checkpoint(tmp_path / "tied", seed=5, tie=True)
    names = load_file(str(model_dir / "model.safetensors")).keys()
    assert "lm_head.weight" not in names
    eng = engine.load(model_dir, dtype="float32")
    assert eng.net.lm_head.weight.data_ptr() == eng.net.language_model.embed_tokens.weight.data_ptr()
    audio = clip(3.0, 5)
    assert eng.generate([audio], max_new_tokens=12)[0] == reference_generate(model_dir, audio, max_new_tokens=12)


def _set_config(model_dir, edit):
    path = model_dir / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


def test_top_level_tie_flag_wins_over_text_config(tmp_path):
    """transformers ties by the top-level flag; a text_config saying otherwise must not break loading."""
    model_dir = build_checkpoint(tmp_path / "tied", seed=6, tie=True)
    _set_config(model_dir, lambda c: c["text_config"].update(tie_word_embeddings=False))
    eng = engine.load(model_dir, dtype="float32")
    assert eng.config.decoder.tie_word_embeddings
    audio = clip(2.5, 6)
    assert eng.generate([audio], max_new_tokens=12)[0] == reference_generate(model_dir, audio, max_new_tokens=12)


def test_stored_head_wins_over_a_tying_config(tmp_path):
    """A tied config with a different lm_head on disk: transformers keeps the stored head, so do we."""
    model_dir = build_checkpoint(tmp_path / "stored", seed=8, tie=False)
    _set_config(model_dir, lambda c: c.update(tie_word_embeddings=True))
    eng = engine.load(model_dir, dtype="float32")
    assert eng.net.lm_head.weight.data_ptr() != eng.net.language_model.embed_tokens.weight.data_ptr()
    audio = clip(2.0, 8)
    assert eng.generate([audio], max_new_tokens=12)[0] == reference_generate(model_dir, audio, max_new_tokens=12)


def test_untied_hf_checkpoint_without_head_names_it(tiny_model_dir, tmp_path):
    d = copy_dir(tiny_model_dir, tmp_path / "nohead")
    _rewrite_tensors(d, lambda t: t.pop("lm_head.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensors: lm_head\.weight"):
        engine.load(d, dtype="float32")


# A template written another way than Qwen's: no default system turn, other separators.
PLAIN_TEMPLATE = (
    "{%- for message in messages -%}<|im_start|>{{ message.role }}: "
    "{%- for item in message.content -%}"
    "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- else -%}{{ item.text }}{%- endif -%}{%- endfor -%}"
    "{%- if not (loop.last and message.role == 'assistant') -%}<|im_end|> {%- endif -%}"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant: {%- endif -%}"
)


@pytest.mark.parametrize("language,context", [(None, ""), ("fr", ""), (None, "Noms: Zoé")])
def test_prompt_follows_the_checkpoints_chat_template(tiny_model_dir, tmp_path, language, context):
    d = copy_dir(tiny_model_dir, tmp_path / "template")
    (d / "chat_template.jinja").write_text(PLAIN_TEMPLATE)
    eng = engine.load(d, dtype="float32")
    audio = clip(3.0, 11)
    ref_inputs = reference_inputs(d, audio, language=language, context=context)
    assert eng.make_request(audio, language=language, context=context).prompt_ids == ref_inputs["input_ids"][0].tolist()
    ours = eng.generate([audio], language=language, context=context, max_new_tokens=12)[0]
    assert ours == reference_generate(d, audio, language=language, context=context, max_new_tokens=12)


def test_prompt_without_a_chat_template_is_the_official_format(tiny_model_dir, tmp_path):
    from engine.text.prompt import prompt_text_parts

    d = copy_dir(tiny_model_dir, tmp_path / "notemplate")
    (d / "chat_template.jinja").unlink()
    eng = engine.load(d, dtype="float32")
    assert not getattr(eng.tokenizer, "chat_template", None)
    assert prompt_text_parts("ctx", "en", eng.tokenizer) == (
        "<|im_start|>system\nctx<|im_end|>\n<|im_start|>user\n<|audio_start|>",
        "<|audio_end|><|im_end|>\n<|im_start|>assistant\nlanguage English<asr_text>")
    with_template = engine.load(tiny_model_dir, dtype="float32")
    audio = clip(2.0, 12)
    assert eng.generate([audio], max_new_tokens=10) == with_template.generate([audio], max_new_tokens=10)


def test_sharded_checkpoint(tiny_model_dir, tmp_path):
    out = tmp_path / "sharded"
    out.mkdir()
    for f in tiny_model_dir.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, out / f.name)
    tensors = load_file(str(tiny_model_dir / "model.safetensors"))
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for fname, part in halves.items():
        save_file({n: tensors[n] for n in part}, str(out / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    (out / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    audio = clip(2.0, 1)
    assert engine.load(out, dtype="float32").generate([audio], max_new_tokens=8) == engine.load(tiny_model_dir, dtype="float32").generate([audio], max_new_tokens=8)


def _rewrite_tensors(model_dir, edit):
    path = model_dir / "model.safetensors"
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_missing_tensor_is_named(tiny_model_dir, tmp_path):
    d = copy_dir(tiny_model_dir, tmp_path / "m")
    _rewrite_tensors(d, lambda t: t.pop("model.language_model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensors: language_model\.layers\.1\.mlp\.up_proj\.weight"):
        engine.load(d, dtype="float32")


def test_wrong_shape_and_unexpected_are_named_together(tiny_model_dir, tmp_path):
    d = copy_dir(tiny_model_dir, tmp_path / "s")

    def edit(t):
        t["model.audio_tower.conv_out.weight"] = torch.zeros(3, 3)
        t["model.something_new.weight"] = torch.zeros(2)
    _rewrite_tensors(d, edit)
    with pytest.raises(CheckpointError) as err:
        engine.load(d, dtype="float32")
    message = str(err.value)
    assert "model.audio_tower.conv_out.weight: checkpoint (3, 3)" in message
    assert "unexpected tensors: model.something_new.weight" in message


def test_pickle_only_checkpoint_is_refused(tiny_model_dir, tmp_path):
    d = copy_dir(tiny_model_dir, tmp_path / "b")
    (d / "model.safetensors").rename(d / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pickle"):
        engine.load(d, dtype="float32")


def test_missing_tokenizer_is_named(tiny_model_dir, tmp_path):
    d = copy_dir(tiny_model_dir, tmp_path / "t")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (d / name).unlink()
    with pytest.raises(CheckpointError, match="tokenizer"):
        engine.load(d, dtype="float32")


def test_missing_folder_and_config(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        engine.load(tmp_path / "nope", dtype="float32")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="config.json"):
        engine.load(tmp_path / "empty", dtype="float32")


def test_bad_options_raise_value_error(tiny_model_dir):
    with pytest.raises(ValueError, match="dtype"):
        engine.load(tiny_model_dir, dtype="int3")
    with pytest.raises(ValueError, match="max_batch_size"):
        engine.load(tiny_model_dir, max_batch_size=0, dtype="float32")
    eng = engine.load(tiny_model_dir, dtype="float32")
    with pytest.raises(ValueError, match="language"):
        eng.submit(np.zeros(16000, np.float32), language="Klingon")


def test_loading_builds_the_network_without_torch_compile_machinery(tiny_model_dir):
    """Building the network on the meta device once imported torch._dynamo (for meta init of
    the embedding and meta math for the position tables): ~7 s of every app start and CLI run."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    code = ("import sys, engine; engine.load(sys.argv[1], device='cpu', dtype='float32'); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tiny_model_dir)], capture_output=True, text=True,
                         timeout=300, check=True, env=env).stdout.split()
    assert out[-1] == "False"
