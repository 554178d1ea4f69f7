"""A self-contained HTML counterexample viewer for linearizability verdicts.

One file, no network: the template (`viewer_template.html`, inline CSS and JS) gets the data as
embedded JSON. Each key is a lane, each op a bar from invoke to completion (info ops run off the
right edge), the longest partial linearization is numbered and joined by a line through its
linearization points, the op that could not be linearized is marked with the state it needed, and
nemesis fault windows are shaded bands.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from checkers.history import History, Op, fault_windows
from checkers.models import Model, get_model
from checkers.verdict import Verdict

TEMPLATE = "viewer_template.html"
DATA_MARK = "__KCHAOS_DATA__"
MAX_VALID_KEYS = 20  # lanes shown for valid keys when nothing failed (a valid history's overview)


def _key_id(key: Any) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def _op_json(model: Model, op: Op, kept: bool) -> dict[str, Any]:
    try:
        desc = model.describe_op(op)
    except ValueError:
        desc = f"{op.f} {op.invoke_value!r}"
    return {
        "id": op.id,
        "process": op.process,
        "f": op.f,
        "type": op.type,
        "desc": desc,
        "invoke_value": op.invoke_value,
        "value": op.value,
        "inv": op.invoke_time,
        "ret": op.complete_time,
        "node": op.node,
        "error": op.error,
        "kept": kept,
    }


def build_data(history: History, verdict: Verdict, model: str | Model = "register") -> dict[str, Any]:
    """The JSON the template renders."""
    model = get_model(model)
    details = verdict.details
    results = {_key_id(r["key"]): r for r in details.get("results", [])}
    parts = model.partition(history.ops)
    failing = [k for k in parts if results.get(_key_id(k), {}).get("valid", True) is not True]
    failing = [k for k in failing if results[_key_id(k)].get("reason") != "not checked"]
    shown = failing or list(parts)[:MAX_VALID_KEYS]
    lanes = []
    for key in shown:
        res = results.get(_key_id(key), {})
        lanes.append(
            {
                "key": key,
                "label": "(single register)" if key is None else str(key),
                "valid": res.get("valid", True),
                "reason": res.get("reason"),
                "ops": [_op_json(model, op, model.keep(op)) for op in parts[key]],
                "linearization": res.get("linearization", []),
                "states_after": res.get("states_after", []),
                "final_state": res.get("final_state"),
                "stuck": res.get("stuck", []),
            }
        )
    times = [op.invoke_time for op in history.ops] + [
        op.complete_time for op in history.ops if op.complete_time is not None
    ]
    times += [e.time for e in history.nemesis]
    return {
        "source": history.source,
        "model": model.name,
        "valid": verdict.valid,
        "checker": verdict.checker,
        "keys_total": len(parts),
        "keys_failing": len(failing),
        "lanes": lanes,
        "faults": [w.to_json() for w in fault_windows(history)],
        "tmin": min(times, default=0),
        "tmax": max(times, default=1),
    }


def render_html(history: History, verdict: Verdict, model: str | Model = "register") -> str:
    template = resources.files("checkers").joinpath(TEMPLATE).read_text(encoding="utf-8")
    data = json.dumps(build_data(history, verdict, model), default=str, separators=(",", ":"))
    # Inside <script type="application/json">: keep "</script>" and friends from ending it early.
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return template.replace(DATA_MARK, data)


def write_html(path: str | Path, history: History, verdict: Verdict, model: str | Model = "register") -> Path:
    path = Path(path)
    path.write_text(render_html(history, verdict, model), encoding="utf-8")
    return path
