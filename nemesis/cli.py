"""`kchaos nemeses`: print the fault catalogue — kinds, modes, targets, parameters, backends.

kchaos nemeses            # one block per kind
kchaos nemeses --json     # the same as JSON (one object per kind)
kchaos run --list-nemeses # the same as the first
"""

from __future__ import annotations

import json
import sys
from typing import Any

from vocab.errors import EXIT_VALID
from vocab.faults.catalogue import CATALOGUE, TARGETED_KIND, TARGETS_DOC, KindSpec, backend_support


def catalogue_json() -> list[dict[str, Any]]:
    support = backend_support()
    out = []
    for kind_spec in CATALOGUE.values():
        out.append(
            {
                "kind": kind_spec.kind,
                "summary": kind_spec.summary,
                "modes": list(kind_spec.modes),
                "default_modes": list(kind_spec.default_modes),
                "mode_doc": dict(kind_spec.mode_doc),
                "targets": list(kind_spec.targets),
                "default_targets": list(kind_spec.default_targets),
                "params": [
                    {
                        "name": p.name,
                        "type": p.type.__name__,
                        "default": list(p.default) if isinstance(p.default, tuple) else p.default,
                        "unit": p.unit,
                        "minimum": p.minimum,
                        "maximum": p.maximum,
                        "choices": list(p.choices),
                        "modes": list(p.modes),
                        "doc": p.doc,
                    }
                    for p in kind_spec.params
                ],
                "stop": kind_spec.stop,
                "backends": sorted(b for b, kinds in support.items() if kind_spec.kind in kinds),
                "mechanism": {"sim": kind_spec.sim, "netns": kind_spec.netns, "docker": kind_spec.docker_mechanism},
            }
        )
    out.append(_targeted_json())
    return out


def _targeted_json() -> dict[str, Any]:
    from node.sim.buggify import TRIGGERS

    return {
        "kind": TARGETED_KIND,
        "summary": "the simulator's targeted faults: struck at what a node just did (sim only, on by default)",
        "modes": list(TRIGGERS),
        "mode_doc": dict(TRIGGERS),
        "backends": ["sim"],
    }


def _mode_list(modes: tuple[str, ...], defaults: tuple[str, ...]) -> str:
    return ", ".join(m + ("*" if m in defaults else "") for m in modes)


def _block(kind_spec: KindSpec, backends: list[str]) -> list[str]:
    lines = [f"{kind_spec.kind} — {kind_spec.summary}", f"  backends:   {', '.join(backends) or 'none yet'}"]
    lines.append(f"  modes:      {_mode_list(kind_spec.modes, kind_spec.default_modes)}")
    for mode, doc in kind_spec.mode_doc.items():
        lines.append(f"    {mode}: {doc}")
    if kind_spec.targets:
        lines.append(f"  targets:    {_mode_list(kind_spec.targets, kind_spec.default_targets)}")
    for p in kind_spec.params:
        where = f" [{', '.join(p.modes)}]" if p.modes else ""
        unit = f" {p.unit}" if p.unit else ""
        choices = f" (one of {', '.join(p.choices)})" if p.choices else ""
        lines.append(f"  {p.name}{where}: {p.doc}{choices}; default {p.describe_default()}{unit}")
    lines.append(f"  stop:       {kind_spec.stop}")
    lines.append(f"  sim:        {kind_spec.sim}")
    lines.append(f"  netns:      {kind_spec.netns}")
    if kind_spec.docker:
        lines.append(f"  docker:     {kind_spec.docker}")
    return lines


def render_text() -> str:
    support = backend_support()
    lines = [
        "Fault kinds (kchaos run --nemesis K,K; [nemesis_options.<kind>] in a test file). * = drawn from by default.",
        "",
    ]
    for kind_spec in CATALOGUE.values():
        backends = sorted(b for b, kinds in support.items() if kind_spec.kind in kinds)
        lines += [*_block(kind_spec, backends), ""]
    lines.append("target modes: " + "; ".join(f"{m}: {doc}" for m, doc in TARGETS_DOC.items()))
    lines.append("")
    targeted = _targeted_json()
    lines.append(f"{TARGETED_KIND} — {targeted['summary']}")
    for trigger, doc in targeted["mode_doc"].items():
        lines.append(f"    {trigger}: {doc}")
    return "\n".join(lines)


def print_catalogue(*, as_json: bool) -> int:
    text = json.dumps(catalogue_json(), indent=2) if as_json else render_text()
    sys.stdout.write(text + "\n")
    return EXIT_VALID


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "nemeses",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func=lambda args: print_catalogue(as_json=args.json))
