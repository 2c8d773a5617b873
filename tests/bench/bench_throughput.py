"""Throughput: our engine vs transformers on a queue of 16 clips, in one process run.

    python tests/bench/bench_throughput.py [--dtypes bfloat16,float32,int8] [--device cpu|cuda]

A checkpoint with the real Qwen3-ASR-0.6B dimensions and random weights is built once and
cached. Every side generates exactly 4 tokens per second of audio (end token suppressed),
so all do the same useful work. Printed: audio-seconds per second for our engine,
transformers' batched generate (batch 8, padded, as the official package does) and
transformers one clip at a time; their ratios; and the share of this machine's roofline:
the time the workload would take at the measured GEMM FLOP/s (encoder and prefill) plus
one read of the decoder weights at the measured GEMV bandwidth per decode step. A last line
adds what that bound leaves out, the decode steps' reads of the KV cache at the same bandwidth.

"int8" runs our engine with quantize="int8" (int8 decoder weights, this machine's default
dtype for the rest) against transformers in that dtype, and prints how many greedy tokens
agree with our unquantized run in that dtype (same clips, same token counts). Random weights:
the agreement says nothing about transcript quality; check that on real weights (wer.py).
Every run prints the most rows that ran together: the whole queue must fit the KV cache.
"""
from __future__ import annotations

import argparse
import time

import torch
from common import (
    gemm_flops,
    gemv_bandwidth,
    real_size_checkpoint,
    settled,
    sync,
    synthetic_clip,
    unseen,
)

DURATIONS = [2, 27, 5, 14, 30, 8, 3, 21, 11, 17, 6, 25, 9, 19, 4, 12]   # seconds, mixed
TOKENS_PER_SECOND = 4


def workload(durations):
    clips = [synthetic_clip(d, i) for i, d in enumerate(durations)]
    return clips, [TOKENS_PER_SECOND * d for d in durations]


PROMPT_TEXT_TOKENS = 20   # the chat template's tokens around the audio placeholders, about


def clip_tokens(eng, clip) -> tuple[int, int]:
    """A clip's feature frames and its audio placeholder tokens in the prompt."""
    from engine.network.config import audio_token_count
    from engine.network.features import num_frames

    frames = num_frames(len(clip))
    return frames, audio_token_count(frames, eng.config.encoder)


def roofline_seconds(eng, clips, new_tokens, flops: float, bandwidth: float) -> float:
    """Ideal time: encoder + prefill FLOPs at GEMM speed, decode steps at one weight read each."""
    enc, dec = eng.config.encoder, eng.config.decoder
    c, d = enc.conv_channels, enc.d_model
    freq = (((enc.num_mel_bins + 1) // 2 + 1) // 2 + 1) // 2
    conv_per_chunk = 2 * 9 * (c * 64 * 50 + c * c * 32 * 25 + c * c * 16 * 13) + 2 * 13 * c * freq * d
    per_token_enc = enc.layers * (2 * (4 * d * d + 2 * d * enc.ffn_dim) + 4 * enc.window_tokens * d) \
        + 2 * (d * d + d * enc.output_dim)
    layer_params = dec.layers * (dec.hidden_size * (dec.heads + 2 * dec.kv_heads) * dec.head_dim
                                 + dec.heads * dec.head_dim * dec.hidden_size + 3 * dec.hidden_size * dec.intermediate_size)
    total_flops = 0.0
    for clip in clips:
        frames, n_audio = clip_tokens(eng, clip)
        total_flops += -(-frames // enc.chunk_frames) * conv_per_chunk + n_audio * per_token_enc
        prompt = n_audio + PROMPT_TEXT_TOKENS
        total_flops += 2 * layer_params * prompt + 2 * dec.hidden_size * dec.vocab_size
    elem = torch.empty((), dtype=eng.torch_dtype).element_size()
    weight_bytes = (layer_params + dec.hidden_size * dec.vocab_size) * elem
    decode_steps = max(new_tokens) - 1
    return total_flops / flops + decode_steps * weight_bytes / bandwidth


def kv_read_seconds(eng, clips, new_tokens, bandwidth: float) -> float:
    """What the roofline leaves out: every decode step also reads each row's cached keys and
    values (all requests decoding together from the first step), at the same GEMV bandwidth."""
    dec = eng.config.decoder
    elem = torch.empty((), dtype=eng.torch_dtype).element_size()
    per_token = 2 * dec.layers * dec.kv_heads * dec.head_dim * elem
    token_steps = 0
    for clip, n in zip(clips, new_tokens):
        prompt = clip_tokens(eng, clip)[1] + PROMPT_TEXT_TOKENS
        token_steps += sum(prompt + k for k in range(1, n))
    return token_steps * per_token / bandwidth


def run_queue(eng, clips, new_tokens) -> tuple[int, int, list[list[int]]]:
    """Submit the whole queue at once and step until every request is done.

    Returns the steps, the most requests holding cache rows at once, and the tokens."""
    reqs = [eng.submit(c, max_new_tokens=n, ignore_eos=True) for c, n in zip(clips, new_tokens)]
    steps = most_rows = 0
    while not all(r.finished for r in reqs):
        eng.step()
        steps += 1
        most_rows = max(most_rows, len(eng.scheduler.running))
    assert [len(r.token_ids) for r in reqs] == new_tokens
    return steps, most_rows, [list(r.token_ids) for r in reqs]


def capture_clips(durations) -> list:
    """Clips of the same lengths as the workload's but other audio: a pass over them meets the
    same step shapes, and leaves nothing in the encoder or prefix cache for the timed pass."""
    return [synthetic_clip(d, 10_000 + i) for i, d in enumerate(durations)]


def run_ours(model_dir, clips, new_tokens, device, dtype, quantize=None, **options):
    import engine

    eng = settled(engine.load(model_dir, device=device, dtype=dtype, quantize=quantize, **options))
    if eng.runner.graphs is not None:
        # CUDA: one untimed pass over a queue of the same shape captures the graph of every
        # bucket it meets (two eager passes and a capture each), which a long-running app does once.
        run_queue(eng, capture_clips([len(c) / 16000 for c in clips]), new_tokens)
    eng.generate([unseen(clips[0], 1)[:16000]], max_new_tokens=2)        # warm-up, on audio the queue lacks
    sync(eng.torch_device)
    preempted = eng.scheduler.preemptions
    t = time.perf_counter()
    steps, most_rows, tokens = run_queue(eng, clips, new_tokens)
    sync(eng.torch_device)
    seconds = time.perf_counter() - t
    print(f"ours: {most_rows} of {len(clips)} rows ran together at most, "
          f"{eng.scheduler.preemptions - preempted} preemptions, KV cache {eng.cache.allocator.num_blocks} "
          f"blocks of {eng.cache.block_size} slots")
    if len(clips) <= eng.scheduler.config.max_batch_size:
        assert most_rows == len(clips), "the whole queue must fit the KV cache at once"
    return seconds, eng, steps, tokens


def token_agreement(tokens, reference) -> str:
    """Greedy tokens equal position by position, and clips identical to the reference."""
    pairs = [(a, b) for x, y in zip(tokens, reference) for a, b in zip(x, y)]
    same = sum(a == b for a, b in pairs)
    first_diff = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), len(x)) for x, y in zip(tokens, reference)]
    return (f"{same}/{len(pairs)} tokens ({same / len(pairs) * 100:.1f}%) equal position by position; "
            f"{sum(x == y for x, y in zip(tokens, reference))}/{len(tokens)} clips identical; "
            f"first difference after {sum(first_diff) / len(first_diff):.1f} tokens on average")


def load_transformers(model_dir, device, dtype):
    from transformers import AutoProcessor, Qwen3ASRForConditionalGeneration

    model = Qwen3ASRForConditionalGeneration.from_pretrained(model_dir, dtype=dtype).to(device).eval()
    return model, AutoProcessor.from_pretrained(model_dir)


@torch.no_grad()
def run_transformers(model, processor, clips, new_tokens, device, batch_size):
    # Warm-up, then the queue in submission order, as the official package batches it.
    warm = processor.apply_transcription_request(audio=[clips[0][:16000]], prompt=[""]).to(device)
    warm["input_features"] = warm["input_features"].to(model.dtype)
    model.generate(**warm, do_sample=False, max_new_tokens=2)
    sync(device)
    t = time.perf_counter()
    for i in range(0, len(clips), batch_size):
        batch, tokens = clips[i:i + batch_size], new_tokens[i:i + batch_size]
        inputs = processor.apply_transcription_request(audio=batch, prompt=[""] * len(batch)).to(device)
        inputs["input_features"] = inputs["input_features"].to(model.dtype)
        n = max(tokens)
        model.generate(**inputs, do_sample=False, max_new_tokens=n, min_new_tokens=n)
    sync(device)
    return time.perf_counter() - t


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtypes", default="bfloat16,float32,int8",
                        help="comma-separated: bfloat16, float32, float16, int8 (int8 weights, default dtype)")
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--skip-single", action="store_true", help="skip transformers one clip at a time")
    args = parser.parse_args()
    device = torch.device(args.device)
    model_dir = real_size_checkpoint()
    durations = (DURATIONS * 4)[:args.clips]
    clips, new_tokens = workload(durations)
    audio_seconds = sum(durations)
    from engine.network import platform
    from engine.network.loading import cpu_description, resolve_dtype

    print(f"device {device}, threads {torch.get_num_threads()}, {len(clips)} clips, {audio_seconds} s of audio, "
          f"{sum(new_tokens)} tokens ({TOKENS_PER_SECOND}/s of audio, end token suppressed)")
    if device.type == "cpu":
        print(f"CPU: {cpu_description()}")
    tokens_by_dtype, transformers_seconds = {}, {}
    for dtype_name in args.dtypes.split(","):
        quantize = "int8" if dtype_name == "int8" else None
        dtype = resolve_dtype(None, device) if quantize else getattr(torch, dtype_name)
        # Emulated bf16 (a CPU without AVX512-BF16 or AMX): the engine runs its GEMMs of many rows in
        # float32 (engine/network/ops.py), and a bf16 2048^3 matmul would take minutes there.
        emulated = dtype == torch.bfloat16 and device.type == "cpu" and not platform.current().native_bf16
        flops = gemm_flops(device, torch.float32 if emulated else dtype)
        bandwidth = gemv_bandwidth(device, dtype)
        label = f"int8 weights, {str(dtype).removeprefix('torch.')} activations" if quantize else dtype_name
        print(f"\n== {label}: GEMM {flops / 1e9:.0f} GFLOP/s, GEMV {bandwidth / 1e9:.1f} GB/s "
              f"(the roofline below uses these, also for int8)")
        ours, eng, steps, tokens = run_ours(model_dir, clips, new_tokens, device, dtype, quantize)
        ideal = roofline_seconds(eng, clips, new_tokens, flops, bandwidth)
        kv = kv_read_seconds(eng, clips, new_tokens, bandwidth)
        del eng
        if quantize and dtype in tokens_by_dtype:
            print(f"int8 vs {str(dtype).removeprefix('torch.')} greedy tokens: "
                  f"{token_agreement(tokens, tokens_by_dtype[dtype])} (random weights: check quality on real ones)")
        elif not quantize:
            tokens_by_dtype[dtype] = tokens
        if dtype in transformers_seconds:     # int8 compares with transformers in its activation dtype
            batched, single = transformers_seconds[dtype]
        else:
            model, processor = load_transformers(model_dir, device, dtype)
            batched = run_transformers(model, processor, clips, new_tokens, device, batch_size=8)
            single = None if args.skip_single else run_transformers(model, processor, clips, new_tokens, device, 1)
            transformers_seconds[dtype] = batched, single
            del model
        rows = [("ours (engine, mixed steps)", ours), ("transformers batched (8)", batched)]
        if single is not None:
            rows.append(("transformers one by one", single))
        for name, secs in rows:
            print(f"{name:30s} {secs:8.2f} s  {audio_seconds / secs:7.2f} audio-s/s  "
                  f"roofline share {ideal / secs * 100:5.1f}%")
        print(f"ours / transformers batched: {batched / ours:.2f}x" +
              (f";  ours / one by one: {single / ours:.2f}x" if single else ""))
        print(f"roofline time {ideal:.2f} s; our engine ran {steps} steps")
        print(f"with the decode steps' KV-cache reads (+{kv:.2f} s): {ideal + kv:.2f} s, "
              f"our share {(ideal + kv) / ours * 100:.1f}%")


if __name__ == "__main__":
    main()
