"""The closing tables of a tune: per graph and for the whole model."""
from __future__ import annotations

from typing import Any, Sequence


def error_line(e: BaseException, width: int = 120) -> str:
    """`Type: first line of the message`: a failure as one line of a report."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:width] if lines else ''}"


def _fmt_us(us: float | None) -> str:
    return "—" if us is None else (f"{us:,.1f}" if us >= 10 else f"{us:.2f}")


def table(title: str, rows: Sequence[Any], min_bytes: int, copy_bw: float | None) -> str:
    """Rows: variant, median µs, speedup over torch.compile (Inductor default), share of copy bandwidth
    on the minimum bytes (inputs read once, outputs written once), kernel count."""
    ref = next((r.us for r in rows if r.variant == "torch.compile" and r.us), None)
    lines = [title, f"{'variant':<20} {'median us':>11} {'vs Inductor':>12} {'% copy BW':>10} {'kernels':>8}  note"]
    for r in rows:
        pred = r.us is not None and not r.measured
        us = _fmt_us(r.us) + ("*" if pred else "")
        speed = f"{ref / r.us:.2f}x" if ref and r.us and not pred else "—"
        bw = f"{100 * min_bytes / (r.us * 1e-6) / copy_bw:.0f}%" if copy_bw and r.us and not pred else "—"
        k = "—" if r.kernels is None else str(r.kernels)
        lines.append(f"{r.variant:<20} {us:>11} {speed:>12} {bw:>10} {k:>8}  {r.note}".rstrip())
    if any(r.us is not None and not r.measured for r in rows):
        lines.append("* predicted, not measured")
    return "\n".join(lines)
