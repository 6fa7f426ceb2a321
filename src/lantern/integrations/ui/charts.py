"""Server-side SVG for the inspector: bar charts, rank bars, a facts time axis. No script, no inline style (the
page's Content-Security-Policy allows neither): geometry in SVG attributes, colours by class from ui.css. Every
text is escaped (``markupsafe``): labels come from archived content."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from datetime import datetime

from markupsafe import Markup

__all__ = ["bar_chart", "fact_axis", "fit_text", "rank_bars", "share_bar", "text_width"]


def _svg(width: float, height: float, body: list[Markup], label: str, cls: str = "chart") -> Markup:
    return Markup(
        '<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0f} {h:.0f}" width="{w:.0f}" '
        'height="{h:.0f}" role="img" aria-label="{label}">{body}</svg>'
    ).format(cls=cls, w=width, h=height, label=label, body=Markup("").join(body))


def _nice(value: float) -> float:
    """The smallest of 1, 2, 5 × 10^k at or above ``value`` (an axis maximum)."""
    if value <= 0:
        return 1
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _number(value: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:g}"


def bar_chart(points: Sequence[tuple[str, float]], label: str, width: int = 720, height: int = 190) -> Markup:
    """Vertical bars, one per (x label, value) in order (e.g. one per day); the first and last x labels (and a few
    between) are written under the axis, every bar has its label and value as a tooltip (SVG ``<title>``)."""
    if not points:
        return Markup('<p class="muted">nothing yet</p>')
    left, right, top, bottom = 44, 8, 10, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = _nice(max(v for _, v in points))
    step = plot_w / len(points)
    bar = max(1.0, min(step * 0.8, 40))
    body = [
        Markup('<line class="axis" x1="{x}" y1="{y}" x2="{x2}" y2="{y}"/>').format(
            x=left, y=top + plot_h, x2=left + plot_w
        ),
        Markup('<text class="tick" x="{x}" y="{y}" text-anchor="end">{v}</text>').format(
            x=left - 6, y=top + 8, v=_number(top_value)
        ),
        Markup('<text class="tick" x="{x}" y="{y}" text-anchor="end">0</text>').format(x=left - 6, y=top + plot_h),
        Markup('<line class="grid" x1="{x}" y1="{y}" x2="{x2}" y2="{y}"/>').format(x=left, y=top, x2=left + plot_w),
    ]
    every = max(1, math.ceil(len(points) / 6))
    labelled = -(10**9)
    for i, (name, value) in enumerate(points):
        h = plot_h * value / top_value
        x = left + i * step + (step - bar) / 2
        body.append(
            Markup(
                '<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"><title>{t}</title></rect>'
            ).format(x=x, y=top + plot_h - h, w=bar, h=max(h, 0.5), t=f"{name}: {value:,g}")
        )
        if (i % every == 0 or i == len(points) - 1) and (i - labelled) * step >= 80:  # labels 80 px apart at least
            labelled = i
            body.append(
                Markup('<text class="tick" x="{x:.1f}" y="{y}" text-anchor="middle">{t}</text>').format(
                    x=x + bar / 2, y=top + plot_h + 16, t=name
                )
            )
    return _svg(width, height, body, label)


def share_bar(share: float, width: int = 160, height: int = 10) -> Markup:
    """A small horizontal bar filled to ``share`` (in [0, 1]) of its track: a table row's part of a whole."""
    share = min(max(share, 0.0), 1.0)
    body = [
        Markup('<rect class="track" x="0" y="0" width="{w}" height="{h}"/>').format(w=width, h=height),
        Markup('<rect class="bar" x="0" y="0" width="{w:.1f}" height="{h}"/>').format(
            w=max(width * share, 1.0), h=height
        ),
    ]
    return _svg(width, height, body, f"{100 * share:.1f} %", cls="share")


def rank_bars(ranks: dict[str, int], signals: Sequence[str], pool: int, width: int = 210) -> Markup:
    """One small bar per signal: full for rank 1, shorter for later ranks (log scale up to ``pool``), none when the
    signal did not rank the candidate; the rank is written beside it."""
    row, left, right = 13, 74, 34
    height = row * len(signals) + 2
    plot_w = width - left - right
    scale = math.log(max(pool, 2) + 1)
    body = []
    for i, name in enumerate(signals):
        y = 1 + i * row
        body.append(
            Markup('<text class="label small" x="{x}" y="{y}" text-anchor="end">{t}</text>').format(
                x=left - 4, y=y + 10, t=name
            )
        )
        rank = ranks.get(name)
        body.append(
            Markup('<rect class="track" x="{x}" y="{y}" width="{w}" height="{h}"/>').format(
                x=left, y=y + 2, w=plot_w, h=row - 4
            )
        )
        if rank is None:
            body.append(
                Markup('<text class="tick small" x="{x}" y="{y}">–</text>').format(x=left + plot_w + 4, y=y + 10)
            )
            continue
        w = max(2.0, plot_w * (1 - math.log(rank) / scale))
        body.append(
            Markup('<rect class="bar" x="{x}" y="{y}" width="{w:.1f}" height="{h}"><title>{t}</title></rect>').format(
                x=left, y=y + 2, w=w, h=row - 4, t=f"{name}: rank {rank}"
            )
        )
        body.append(
            Markup('<text class="tick small" x="{x}" y="{y}">#{r}</text>').format(x=left + plot_w + 4, y=y + 10, r=rank)
        )
    return _svg(width, height, body, "rank per signal", cls="ranks")


def text_width(text: str, size: float) -> float:
    """An upper estimate of ``text``'s width in px at font size ``size`` px in the page's sans-serif stack: a wide
    character (East Asian width W or F: CJK) one em, an uppercase letter, m or w 0.8 em, any other 0.62 em (ours,
    measured against DejaVu Sans and WenQuanYi Zen Hei in Chromium: tests/test_ui_browser.py)."""
    em = 0.0
    for ch in text:
        if unicodedata.east_asian_width(ch) in "WF":
            em += 1.0
        elif ch.isupper() or ch in "mwMW@%":
            em += 0.8
        else:
            em += 0.62
    return em * size


def fit_text(text: str, width: float, size: float) -> str:
    """``text`` as written in ``width`` px at ``size`` px: whole when it fits (``text_width``), else its longest
    head that fits with "…" after it; "" when not even 2 characters and the ellipsis fit."""
    if text_width(text, size) <= width:
        return text
    cut = len(text)
    while cut > 0 and text_width(text[:cut] + "…", size) > width:
        cut -= 1
    return text[:cut] + "…" if cut >= 2 else ""


VALUE_PX, LABEL_PX = 11, 12  # font sizes of a version's value and of a key (ui.css: svg .value, svg .label)


def fact_axis(
    keys: Sequence[tuple[str, Sequence[tuple[datetime, datetime | None, str, bool]]]],
    start: datetime,
    end: datetime,
    as_of: datetime | None,
    width: int = 1180,
) -> Markup:
    """One row per fact key; each version ``(valid_from, valid_to or None, value, current)`` a segment on a shared
    time axis from ``start`` to ``end`` (a version with no end runs to the right edge), the current version
    highlighted, ``as_of`` a vertical line. A version's value is written above its segment only in the room
    before the next version of its row starts (cut with "…" to fit, left out when not 2 characters fit), so
    labels never overprint however dense the versions; every segment's tooltip (``<title>``) has its value and
    times, the key's has its version count."""
    if not keys:
        return Markup('<p class="muted">no facts</p>')
    row, left, right, top = 30, 170, 16, 24
    height = top + row * len(keys) + 8
    plot_w = width - left - right
    span = max((end - start).total_seconds(), 1.0)

    def x(t: datetime) -> float:
        return left + plot_w * min(max((t - start).total_seconds() / span, 0.0), 1.0)

    body = [
        Markup('<text class="tick" x="{x}" y="14">{t}</text>').format(x=left, t=start.strftime("%Y-%m-%d %H:%M")),
        Markup('<text class="tick" x="{x}" y="14" text-anchor="end">{t}</text>').format(
            x=left + plot_w, t="still valid →" if as_of is None else end.strftime("%Y-%m-%d %H:%M")
        ),
    ]
    for i, (key, versions) in enumerate(keys):
        y = top + i * row
        many = f"{key}: {len(versions)} version{'' if len(versions) == 1 else 's'}"
        body.append(
            Markup('<text class="label" x="{x}" y="{y}" text-anchor="end">{t}<title>{m}</title></text>').format(
                x=left - 8, y=y + 18, t=fit_text(key, left - 12, LABEL_PX) or "…", m=many
            )
        )
        body.append(
            Markup('<line class="grid" x1="{a}" y1="{y}" x2="{b}" y2="{y}"/>').format(a=left, b=left + plot_w, y=y + 14)
        )
        ordered = sorted(versions, key=lambda v: v[0])
        starts = [x(v[0]) for v in ordered]
        for n, (valid_from, valid_to, value, current) in enumerate(ordered):
            a, b = starts[n], x(valid_to or end)
            cls = "segment current" if current else "segment"
            tip = f"{key} = {value} from {valid_from:%Y-%m-%d %H:%M}" + (
                f" to {valid_to:%Y-%m-%d %H:%M}" if valid_to else ", still valid"
            )
            body.append(
                Markup(
                    '<rect class="{c}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="10" rx="3"><title>{t}</title></rect>'
                ).format(c=cls, x=a, y=y + 9, w=max(b - a, 3), t=tip)
            )
            body.append(Markup('<circle class="{c}" cx="{x:.1f}" cy="{y}" r="4"/>').format(c=cls, x=a, y=y + 14))
            room = (starts[n + 1] if n + 1 < len(starts) else left + plot_w + right) - a - 6
            text = fit_text(value, room, VALUE_PX)
            if text:
                body.append(
                    Markup('<text class="value" x="{x:.1f}" y="{y}">{t}</text>').format(x=a + 2, y=y + 6, t=text)
                )
    if as_of is not None:
        body.append(
            Markup('<line class="asof" x1="{x:.1f}" y1="18" x2="{x:.1f}" y2="{y}"><title>{t}</title></line>').format(
                x=x(as_of), y=height - 4, t=f"as of {as_of:%Y-%m-%d %H:%M} UTC"
            )
        )
    return _svg(width, height, body, "fact versions on a time axis")
