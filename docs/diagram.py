"""Draw docs/img/architecture.png: how Lantern sits between an app and its LLM.

Run from the repository root with a Python that has matplotlib (the `eval` extra installs it):

    python docs/diagram.py

The picture: the app, Lantern and the LLM; the write path (archive) and the read path (recover);
the one SQLite store under both. docs/architecture.md describes each stage.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().parent / "img" / "architecture.png"

INK = "#1f2933"
WRITE = "#dbeafe"  # write path boxes
WRITE_EDGE = "#2563eb"
READ = "#fde68a"  # read path boxes
READ_EDGE = "#b45309"
STORE = "#dcfce7"
STORE_EDGE = "#15803d"
OUTER = "#f8fafc"
GREY = "#64748b"


def box(ax, x, y, w, h, text, face, edge, size=10, weight="normal", align="center"):
    """A rounded box with its text centred (or left-aligned). Returns (x, y, w, h)."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.6", facecolor=face, edgecolor=edge, linewidth=1.4
        )
    )
    if align == "left":
        ax.text(
            x + 0.9, y + h / 2, text, ha="left", va="center", fontsize=size, color=INK, weight=weight, linespacing=1.35
        )
    else:
        ax.text(
            x + w / 2,
            y + h / 2,
            text,
            ha="center",
            va="center",
            fontsize=size,
            color=INK,
            weight=weight,
            linespacing=1.25,
        )
    return x, y, w, h


def arrow(ax, start, end, color=INK, style="-|>", width=1.3, rad=0.0, both=False):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="<|-|>" if both else style,
            mutation_scale=13,
            color=color,
            linewidth=width,
            connectionstyle=f"arc3,rad={rad}",
            shrinkA=2,
            shrinkB=2,
        )
    )


def chain(ax, boxes, color):
    """Arrows from each box's right edge to the next box's left edge, at mid height."""
    for (x1, y1, w1, h1), (x2, y2, _w2, h2) in zip(boxes, boxes[1:]):
        arrow(ax, (x1 + w1, y1 + h1 / 2), (x2, y2 + h2 / 2), color=color)


def main() -> None:
    fig = plt.figure(figsize=(16.4, 10), dpi=150)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 164)
    ax.set_ylim(0, 100)
    ax.axis("off")

    # --- top row: the app, Lantern, the LLM
    app = box(
        ax,
        4,
        85,
        30,
        10,
        "Your app or agent\n(Python, Claude Code hooks,\nMCP client, proxy client)",
        "#ffffff",
        INK,
        size=10,
    )
    box(ax, 126, 85, 30, 10, "The LLM\n(any OpenAI- or Anthropic-\ncompatible API)", "#ffffff", INK, size=10)
    arrow(ax, (app[0] + app[2], 90), (126, 90), both=True)
    ax.text(
        80,
        92.3,
        "every turn passes through (or is read from the transcript)",
        ha="center",
        va="bottom",
        fontsize=10,
        color=INK,
    )
    ax.text(
        80,
        87.7,
        "after a compaction: the recovered block goes back into the context",
        ha="center",
        va="top",
        fontsize=10,
        color=INK,
    )

    # Lantern: one frame around both paths and the store
    ax.add_patch(
        FancyBboxPatch(
            (4, 3), 152, 77, boxstyle="round,pad=0.02,rounding_size=1.2", facecolor=OUTER, edgecolor=INK, linewidth=1.6
        )
    )
    ax.text(80, 77, "Lantern", ha="center", va="center", fontsize=16, weight="bold", color=INK)
    ax.text(
        80,
        73.4,
        "zero LLM calls on both paths; offline; English and Chinese",
        ha="center",
        va="center",
        fontsize=10,
        color=GREY,
    )

    # --- write path (top lane)
    ax.text(7, 69, "Write path: Lantern.archive", ha="left", va="center", fontsize=12, weight="bold", color=WRITE_EDGE)
    ax.text(153, 69, "every turn; one transaction per call", ha="right", va="center", fontsize=10, color=WRITE_EDGE)
    stages = [
        "parse",
        "redact\nsecrets",
        "chunk\ninto turns",
        "summarize",
        "tag\n(lookup hints)",
        "classify\n(category)",
        "extract\nfacts",
        "embed",
        "store",
    ]
    w, gap, x0 = 14.2, 2.3, 7
    write_boxes = [box(ax, x0 + i * (w + gap), 56, w, 9, s, WRITE, WRITE_EDGE, size=10) for i, s in enumerate(stages)]
    chain(ax, write_boxes, WRITE_EDGE)
    arrow(ax, (19, 85), (19, 65), color=WRITE_EDGE)
    ax.text(20.2, 82.5, "archive(messages)", ha="left", va="center", fontsize=9.5, color=WRITE_EDGE)

    # --- the store, between the two lanes
    box(
        ax,
        7,
        42,
        146,
        9,
        "One SQLite file (WAL): verbatim turns, summaries, tags, FTS5 index (Porter + CJK bigrams), vectors,\n"
        "versioned facts, confidence c and success rate σ. Nothing is deleted but by forget.",
        STORE,
        STORE_EDGE,
        size=10,
    )
    sx, sy, sw, _ = write_boxes[-1]
    arrow(ax, (sx + sw / 2, sy), (sx + sw / 2, 51), color=STORE_EDGE, width=1.6)

    # --- read path (bottom lane)
    ax.text(7, 37.5, "Read path: Lantern.recover", ha="left", va="center", fontsize=12, weight="bold", color=READ_EDGE)
    ax.text(153, 37.5, "at a compaction or a back-reference", ha="right", va="center", fontsize=10, color=READ_EDGE)
    y, h = 13, 13
    query = box(ax, 7, y, 17, h, "query\n(question, or\ntail + summary)", READ, READ_EDGE, size=10)
    signals = box(
        ax,
        28,
        9,
        36,
        21,
        "ranked signals\n"
        "• semantic (cosine)\n"
        "• full text (FTS5 BM25)\n"
        "• keyword (lookup hints)\n"
        "• importance (R·F·D·c·σ)\n"
        "• ours: prf, time, neighbour,\n"
        "  local, speaker, semantic_e5",
        READ,
        READ_EDGE,
        size=10,
        align="left",
    )
    fuse = box(ax, 68, y, 17, h, "RRF fusion\nk = 60\n(weighted)", READ, READ_EDGE, size=10)
    mmr = box(ax, 89, y, 17, h, "MMR\nλ = 0.85\n(diversity)", READ, READ_EDGE, size=10)
    pack = box(ax, 110, y, 22, h, "pack within\na budget\n(6,000 characters)", READ, READ_EDGE, size=10)
    block = box(ax, 136, y, 17, h, "block\n≤ budget", READ, READ_EDGE, size=10, weight="bold")
    chain(ax, [query, signals, fuse, mmr, pack, block], READ_EDGE)
    arrow(ax, (46, 42), (46, 30), color=STORE_EDGE, width=1.6)
    ax.text(47.2, 36, "read", ha="left", va="center", fontsize=9, color=STORE_EDGE)
    arrow(ax, (121, 26), (121, 42), color=STORE_EDGE, width=1.3)
    ax.text(122.2, 33.5, "reinforce\n(c, σ, access)", ha="left", va="center", fontsize=9, color=STORE_EDGE)

    # the block goes back to the LLM's context: around the frame's right side
    mid = y + h / 2
    ax.plot([153.4, 160, 160], [mid, mid, 90], color=READ_EDGE, linewidth=1.3)
    arrow(ax, (160, 90), (156, 90), color=READ_EDGE)
    ax.text(
        161.5,
        55,
        "block injected into the context",
        ha="center",
        va="center",
        fontsize=9.5,
        color=READ_EDGE,
        rotation=90,
    )

    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=150, facecolor="white")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
