"""vLLM's CUDA-graph capture list: its sizes, its largest size, and the rounding speculative decoding adds.

Sources: vllm/config/vllm.py (`_set_cudagraph_sizes`) and vllm/config/compilation.py
(`adjust_cudagraph_sizes_for_spec_decode`). Sizes count tokens in the forward:
1, 2, 4, multiples of 8 below 256, then multiples of 16 up to
`max_cudagraph_capture_size`, whose default is min(max_num_seqs · (1 + k) · 2, 512);
sizes above max_num_batched_tokens are dropped. With k > 0 drafts every size
is rounded up to a multiple of 1 + k (a full graph of a uniform decode batch
holds whole requests) and those past the largest are dropped; if none is
left, the list is [1 + k].

    capture_list(max_num_seqs=32, k=3, max_num_batched_tokens=8192)   # [4, 8, 16, ..., 256]
"""

from __future__ import annotations

MAX_CAPTURE = 512


def capture_sizes(top: int, speculative: bool = False) -> list[int]:
    """vLLM's default capture list up to `top` tokens, before any rounding for speculation."""
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)]
    return [s for s in sizes if s <= top]


def default_max_capture(max_num_seqs: int, block_size: int, given: tuple[int, ...] = ()) -> int:
    """max_cudagraph_capture_size: a given list's largest, else min(max_num_seqs · (1 + k) · 2, 512)."""
    if given:
        return max(given)
    return min(max_num_seqs * (1 + block_size) * 2, MAX_CAPTURE)


def spec_decode_sizes(sizes: list[int], query_tokens: int, top: int) -> list[int]:
    """Every size rounded up to a multiple of `query_tokens` (1 + k), those past `top` dropped; [1 + k]
    when none is left and it fits."""
    if query_tokens <= 1:
        return sorted(set(sizes))
    rounded = sorted({size for size in (-(-s // query_tokens) * query_tokens for s in sizes) if size <= top})
    return rounded or ([query_tokens] if query_tokens <= top else [])


def capture_list(max_num_seqs: int, k: int, max_num_batched_tokens: int, given: tuple[int, ...] = ()) -> list[int]:
    """The capture list a `vllm serve` line runs with (`given`: --cudagraph-capture-sizes)."""
    top = min(default_max_capture(max_num_seqs, k, given), max_num_batched_tokens)
    sizes = [size for size in (list(given) or capture_sizes(top)) if size <= top]
    return spec_decode_sizes(sizes, 1 + k, top)
