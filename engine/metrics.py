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

    def samples(self, name: str, labels: str = "") -> list[str]:
        """The histogram's sample lines (`labels`: 'key="value"', added to each)."""
        pre = labels + "," if labels else ""
        lines, cum = [], 0
        for le, c in zip(self.buckets, self.counts):
            cum += c
            lines.append(f'{name}_bucket{{{pre}le="{le}"}} {cum}')
        tail = f"{{{labels}}}" if labels else ""
        lines += [f'{name}_bucket{{{pre}le="+Inf"}} {self.count}', f"{name}_sum{tail} {self.sum}",
                  f"{name}_count{tail} {self.count}"]
        return lines


@dataclass
class EngineMetrics:
    requests: dict = field(default_factory=dict)  # outcome -> count: completed | error | aborted | failed
    prompt_tokens: int = 0
    generation_tokens: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(TPOT_BUCKETS))


def merged(metrics: list[EngineMetrics]) -> EngineMetrics:
    """The sum of several engines' metrics (data-parallel replicas in total)."""
    total = EngineMetrics()
    for m in metrics:
        for outcome, n in m.requests.items():
            total.requests[outcome] = total.requests.get(outcome, 0) + n
        total.prompt_tokens += m.prompt_tokens
        total.generation_tokens += m.generation_tokens
        for h, mh in ((total.ttft, m.ttft), (total.tpot, m.tpot)):
            h.counts = [a + b for a, b in zip(h.counts, mh.counts)]
            h.sum += mh.sum
            h.count += mh.count
    return total


def render(engine) -> str:
    """The Prometheus text exposition of `engine` (an AsyncEngine, or Replicas: the
    families in total, then `structgen_replica_*` families labelled by replica)."""
    replicas = getattr(engine, "replicas", None)
    if replicas is None:
        return "\n".join(_lines("structgen", [("", engine.metrics, _Gauges([engine]))])) + "\n"
    total = [("", merged([e.metrics for e in replicas]), _Gauges(replicas))]
    each = [(f'replica="{i}"', e.metrics, _Gauges([e])) for i, e in enumerate(replicas)]
    return "\n".join(_lines("structgen", total) + _lines("structgen_replica", each)) + "\n"


class _Gauges:
    """The gauges of one engine, or of several added up."""

    def __init__(self, engines):
        self.num_running = sum(e.num_running for e in engines)
        self.num_waiting = sum(e.num_waiting for e in engines)
        free = sum(e.llm.block_manager.num_free_blocks for e in engines)
        self.kv_usage = round(1 - free / sum(e.llm.block_manager.num_blocks for e in engines), 6)


def _lines(prefix: str, series: list) -> list[str]:
    """Each family once, with a sample per (labels, metrics, gauge source) in `series`."""
    def label(labels: str, extra: str = "") -> str:
        both = ",".join(x for x in (labels, extra) if x)
        return f"{{{both}}}" if both else ""

    name = f"{prefix}_requests_total"
    lines = [f"# HELP {name} Requests ended, by outcome.", f"# TYPE {name} counter"]
    for labels, m, _ in series:
        for outcome in ("completed", "error", "aborted", "failed"):
            o = f'outcome="{outcome}"'
            lines.append(f"{name}{label(labels, o)} {m.requests.get(outcome, 0)}")
    gauges = [
        ("prompt_tokens_total", "counter", "Prompt tokens of the requests started.", lambda m, e: m.prompt_tokens),
        ("generation_tokens_total", "counter", "Tokens generated (sampled or forced).",
         lambda m, e: m.generation_tokens),
        ("num_requests_running", "gauge", "Sequences in the running batch.", lambda m, e: e.num_running),
        ("num_requests_waiting", "gauge", "Sequences waiting for the batch, or for their "
         "constraint to compile.", lambda m, e: e.num_waiting),
        ("kv_cache_usage_ratio", "gauge", "Fraction of KV blocks in use.", lambda m, e: e.kv_usage),
    ]
    for short, kind, help_text, value in gauges:
        name = f"{prefix}_{short}"
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{label(labels)} {value(m, e)}" for labels, m, e in series]
    for short, attr, help_text in (
            ("time_to_first_token_seconds", "ttft", "Time from arrival to the first token."),
            ("time_per_output_token_seconds", "tpot", "Mean time between output tokens after the first, "
                                                      "per request.")):
        name = f"{prefix}_{short}"
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        for labels, m, _ in series:
            lines += getattr(m, attr).samples(name, labels)
    return lines
