"""A self-contained HTML page (inline SVG and CSS, no scripts from the network) drawing every cycle
an Elle-style verdict reports: transactions as boxes listing their micro-ops, dependencies as labelled
arrows, the plain-text explanation beneath. Works from the verdict's JSON alone, so a stored
results.json can be rendered again later."""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

from checkers.elle.explain import show
from checkers.verdict import Verdict

COLOURS = {"ww": "#1f5fbf", "wr": "#1a8a3a", "rw": "#c8281e", "process": "#7a3fb0", "realtime": "#d07a00"}
BOX_W, LINE_H, MAX_MOPS = 270, 16, 8

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; }
.valid-true { color: #1a8a3a; } .valid-false { color: #c8281e; } .valid-unknown { color: #d07a00; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
svg { border: 1px solid #ddd; background: #fff; max-width: 100%; height: auto; }
svg text { font: 12px ui-monospace, monospace; }
.legend span { margin-right: 1.2em; font-weight: bold; }
"""


def _mop_text(mop: list[Any]) -> str:
    """A micro-op on one line; a long list keeps its first element and its tail (what ordering shows)."""
    f, k, v = mop
    if isinstance(v, list) and len(v) > 5:
        v_text = f"[{show(v[0])} … {' '.join(show(x) for x in v[-3:])}] ({len(v)})"
    else:
        v_text = show(v)
    text = f"{f} {show(k)} {v_text}"
    return text if len(text) <= 34 else text[:33] + "…"


def _box_height(txn: dict[str, Any]) -> int:
    return LINE_H * (2 + min(len(txn["value"]), MAX_MOPS + 1)) + 8


def _border_point(cx: float, cy: float, hw: float, hh: float, tx: float, ty: float) -> tuple[float, float]:
    """Where the ray from a box's centre towards (tx, ty) leaves the box."""
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return cx, cy
    t = min(hw / abs(dx) if dx else math.inf, hh / abs(dy) if dy else math.inf)
    return (cx + dx * t, cy + dy * t) if t < 1 else (tx, ty)


def cycle_svg(example: dict[str, Any]) -> str:
    """One cycle: boxes on a circle, curved arrows from each transaction to the next."""
    txns = {t["name"]: t for t in example["cycle"]}
    order = list(txns)
    n = len(order)
    tallest = max(_box_height(t) for t in txns.values())
    radius = 0.0 if n == 1 else (BOX_W + 110) / (2 * math.sin(math.pi / n)) if n > 2 else (BOX_W + 110) / 2
    centre_x = radius + BOX_W / 2 + 30
    centre_y = (radius if n > 2 else 50) + tallest / 2 + 30
    places = {}
    for i, name in enumerate(order):
        angle = -math.pi / 2 + 2 * math.pi * i / n if n > 2 else math.pi * (1 - i)
        places[name] = (centre_x + radius * math.cos(angle), centre_y + radius * math.sin(angle))
    width, height = 2 * centre_x, 2 * centre_y
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">',
        "<defs>",
    ]
    for rel, colour in COLOURS.items():
        parts.append(
            f'<marker id="arrow-{rel}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
            f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{colour}"/></marker>'
        )
    parts.append("</defs>")
    for step in example["steps"]:
        if step["from"] not in places or step["to"] not in places:
            continue
        (x1, y1), (x2, y2) = places[step["from"]], places[step["to"]]
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        bend = 60 if n == 2 else 40  # curve to the right of the direction of travel
        length = math.hypot(x2 - x1, y2 - y1) or 1
        cx, cy = mx + bend * (y2 - y1) / length, my - bend * (x2 - x1) / length
        ha, hb = _box_height(txns[step["from"]]) / 2, _box_height(txns[step["to"]]) / 2
        sx, sy = _border_point(x1, y1, BOX_W / 2 + 4, ha + 4, cx, cy)
        ex, ey = _border_point(x2, y2, BOX_W / 2 + 4, hb + 4, cx, cy)
        colour = COLOURS.get(step["rel"], "#444")
        lx, ly = 0.25 * sx + 0.5 * cx + 0.25 * ex, 0.25 * sy + 0.5 * cy + 0.25 * ey
        parts.append(
            f"<g><title>{escape(step['from'])} &lt; {escape(step['to'])}: {escape(step['why'])}</title>"
            f'<path d="M {sx:.1f} {sy:.1f} Q {cx:.1f} {cy:.1f} {ex:.1f} {ey:.1f}" fill="none" '
            f'stroke="{colour}" stroke-width="2" marker-end="url(#arrow-{escape(step["rel"])})"/>'
            f'<text x="{lx:.1f}" y="{ly:.1f}" fill="{colour}" text-anchor="middle" '
            f'style="font-weight:bold" paint-order="stroke" stroke="#fff" stroke-width="4">'
            f"{escape(step['rel'])}</text></g>"
        )
    for name, (x, y) in places.items():
        t = txns[name]
        h = _box_height(t)
        left, top = x - BOX_W / 2, y - h / 2
        lines = [f"{name}  (index {t['index']}, p{t['process']}, {t['type']})"]
        lines += [_mop_text(m) for m in t["value"][:MAX_MOPS]]
        if len(t["value"]) > MAX_MOPS:
            lines.append(f"... {len(t['value']) - MAX_MOPS} more")
        parts.append(
            f'<rect x="{left:.1f}" y="{top:.1f}" width="{BOX_W}" height="{h}" rx="6" fill="#fbfbf3" stroke="#555"/>'
        )
        for j, line in enumerate(lines):
            weight = ' style="font-weight:bold"' if j == 0 else ""
            parts.append(f'<text x="{left + 8:.1f}" y="{top + 18 + j * LINE_H:.1f}"{weight}>{escape(line)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


# How the non-cycle anomalies are drawn: which transactions an example names (in this order), and the
# relation between them that the anomaly breaks.
_ROLES = ("failed_writer", "writer", "reader", "op")
_RELATIONS = {
    "G1a": [("writer", "reader", "wr", "the reader saw a value only this failed transaction wrote")],
    "G1b": [("writer", "reader", "wr", "the reader saw a value its writer overwrote itself")],
    "dirty-update": [("failed_writer", "writer", "ww", "a committed append follows a failed one")],
    "future-read-realtime": [
        ("op", "writer", "realtime", "the reader completed before the writer was invoked"),
        ("writer", "op", "wr", "yet the reader saw the writer's append"),
    ],
}


def evidence_drawing(name: str, example: dict[str, Any]) -> dict[str, Any] | None:
    """A drawable example (the shape `cycle_svg` takes) for an anomaly found without a cycle: its
    transactions as boxes, and the relation the anomaly breaks as arrows. None if it names none."""
    txns: dict[str, dict[str, Any]] = {}
    for role in _ROLES:
        if isinstance(example.get(role), dict):
            txns[role] = {"name": f"T{len(txns) + 1}", **example[role]}
    for t in example.get("txns", []) if name == "lost-update" else []:
        txns[f"t{len(txns)}"] = {"name": f"T{len(txns) + 1}", **t}
    if not txns:
        return None
    steps = [
        {"from": txns[a]["name"], "to": txns[b]["name"], "rel": rel, "why": why}
        for a, b, rel, why in _RELATIONS.get(name, [])
        if a in txns and b in txns
    ]
    if name == "lost-update":
        names = [t["name"] for t in txns.values()]
        why = "each overwrote the version the other read"
        steps = [{"from": a, "to": b, "rel": "rw", "why": why} for a, b in zip(names, [*names[1:], names[0]])]
    return {"cycle": list(txns.values()), "steps": steps}


def render_html(verdict: Verdict | dict[str, Any]) -> str:
    """The whole report page for one Elle-style verdict (a Verdict or its `to_json()`)."""
    data = verdict.to_json() if isinstance(verdict, Verdict) else verdict
    valid = data.get("valid")
    title = f"{data.get('checker', 'elle')}: {valid}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f'<h1>{escape(str(data.get("checker", "")))}: <span class="valid-{str(valid).lower()}">'
        f"{escape(str(valid))}</span></h1>",
        f"<p>Consistency model: <b>{escape(str(data.get('consistency_model', '')))}</b>. "
        f"Transactions: {escape(json.dumps(data.get('txns_by_type', {})))}.</p>",
    ]
    if data.get("not") or data.get("also_not"):
        out.append(
            f"<p>Ruled out: <b>{escape(', '.join(data.get('not', [])))}</b>"
            f"{' (and so ' + escape(', '.join(data.get('also_not', []))) + ')' if data.get('also_not') else ''}.</p>"
        )
    counts = data.get("anomaly_counts", {})
    violations = set(data.get("violations", []))
    if counts:
        out.append("<table><tr><th>anomaly</th><th>count</th><th>violates the model</th></tr>")
        for name, count in counts.items():
            out.append(
                f"<tr><td>{escape(name)}</td><td>{count}</td><td>{'yes' if name in violations else 'no'}</td></tr>"
            )
        out.append("</table>")
    else:
        out.append("<p>No anomalies found.</p>")
    out.append(
        '<p class="legend">'
        + "".join(f'<span style="color:{c}">{escape(rel)}</span>' for rel, c in COLOURS.items())
        + "</p>"
    )
    meanings = data.get("meanings", {})
    for name, examples in data.get("anomalies", {}).items():
        out.append(f"<h2>{escape(name)} ({counts.get(name, len(examples))})</h2>")
        if name in meanings:
            out.append(f"<p>{escape(meanings[name])}.</p>")
        for i, example in enumerate(examples, start=1):
            if "steps" in example:
                out.append(f"<h3>{escape(name)} #{i}: a cycle of {example.get('length', len(example['steps']))}</h3>")
                out.append(cycle_svg(example))
                out.append(f"<pre>{escape(example['explanation'])}</pre>")
                continue
            drawing = evidence_drawing(name, example)
            if drawing is not None:
                out.append(cycle_svg(drawing))
            if "explanation" in example:
                out.append(f"<p>{escape(example['explanation'])}</p>")
            out.append(f"<pre>{escape(json.dumps(example, indent=2, default=str))}</pre>")
    out.append("</body></html>")
    return "\n".join(out)


def write_html(path: str | Path, verdict: Verdict | dict[str, Any]) -> Path:
    target = Path(path)
    target.write_text(render_html(verdict), encoding="utf-8")
    return target
