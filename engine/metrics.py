"""Counters and histograms of an `AsyncEngine`, rendered as Prometheus text.

Written by the engine's loop thread only; read by the server (a plain int read is
safe under the GIL, and a scrape may be one step stale).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Seconds: from a fraction of a millisecond (a GPU decode step) to a minute (a CPU prefill).
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


@dataclass
class Histogram:
    buckets: tuple
    counts: list = field(default_factory=list)
    sum: float = 0.0
    count: int = 0

    def __post_init__(self):
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1

    def render(self, name: str, help_text: str) -> list[str]:
        lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        cum = 0
        for le, c in zip(self.buckets, self.counts):
            cum += c
            lines.append(f'{name}_bucket{{le="{le}"}} {cum}')
        lines += [f'{name}_bucket{{le="+Inf"}} {self.count}', f"{name}_sum {self.sum}",
                  f"{name}_count {self.count}"]
        return lines


@dataclass
class EngineMetrics:
    requests: dict = field(default_factory=dict)  # outcome -> count: completed | error | aborted | failed
    prompt_tokens: int = 0
    generation_tokens: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(TPOT_BUCKETS))


def render(engine) -> str:
    """The Prometheus text exposition of `engine` (an AsyncEngine)."""
    m, bm = engine.metrics, engine.llm.block_manager
    lines = ["# HELP structgen_requests_total Requests ended, by outcome.",
             "# TYPE structgen_requests_total counter"]
    for outcome in ("completed", "error", "aborted", "failed"):
        lines.append(f'structgen_requests_total{{outcome="{outcome}"}} {m.requests.get(outcome, 0)}')
    gauges = [
        ("structgen_prompt_tokens_total", "counter", "Prompt tokens of the requests started.", m.prompt_tokens),
        ("structgen_generation_tokens_total", "counter", "Tokens generated (sampled or forced).",
         m.generation_tokens),
        ("structgen_num_requests_running", "gauge", "Sequences in the running batch.", engine.num_running),
        ("structgen_num_requests_waiting", "gauge", "Sequences waiting for the batch, or for their "
         "constraint to compile.", engine.num_waiting),
        ("structgen_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks in use.",
         round(1 - bm.num_free_blocks / bm.num_blocks, 6)),
    ]
    for name, kind, help_text, value in gauges:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
    lines += m.ttft.render("structgen_time_to_first_token_seconds", "Time from arrival to the first token.")
    lines += m.tpot.render("structgen_time_per_output_token_seconds",
                           "Mean time between output tokens after the first, per request.")
    return "\n".join(lines) + "\n"
