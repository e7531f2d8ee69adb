"""A Grafana dashboard's panel queries run as Grafana runs them against a real Prometheus.

What Grafana does with a dashboard JSON, in the parts the dashboards we test use:

- A query variable ``label_values(METRIC, LABEL)`` is the sorted values of LABEL on the series of
  METRIC in the dashboard's time range (Grafana asks /api/v1/series; its docs' "Prometheus
  template variables" table); a variable referring to an earlier one is expanded after it.
- "All" on a variable with ``includeAll`` and no custom ``allValue`` selects every value.
- A multi-value (or include-All) variable is written into PromQL by the Prometheus data source's
  ``interpolateQueryExpr`` (grafana/grafana packages/grafana-prometheus/src/escaping.ts): each
  value goes through ``prometheusSpecialRegexEscape`` (a backslash becomes four, each of
  ``$^*{}[]+?.()|`` gets two in front: one for the PromQL string, one for the regex), one value is
  written alone, several as ``(a|b|c)``. A single-value variable only has its backslashes and
  single quotes escaped (``prometheusRegularEscape``).
- ``$__interval`` is the range over the panel's data points, never below the data source's scrape
  interval; ``$__rate_interval`` is ``max($__interval + scrape interval, 4 * scrape interval)``;
  ``$__range`` is the dashboard's range. A range query's step is ``$__interval``.

Everything runs over plain HTTP GETs on loopback, as Grafana's data source proxy sends them.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?P<metric>.+?)\s*,\s*(?P<label>\w+)\s*\)\s*$")
# $name, ${name}, ${name:format} and the deprecated [[name]]
VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)\]\]")
REGEX_META = re.compile(r"[$^*{}\[\]+?.()|]")
MAX_DATA_POINTS = 1000  # about a panel's width in pixels, Grafana's default maxDataPoints


@dataclass(frozen=True)
class Target:
    """One query of one panel."""

    panel: str
    ref_id: str
    expr: str
    instant_only: bool  # the target asks for an instant query only ("instant": true, no range)

    @property
    def name(self) -> str:
        return f"{self.panel} [{self.ref_id}]"


@dataclass(frozen=True)
class Variable:
    name: str
    query: str
    multi: bool
    include_all: bool
    all_value: str | None
    regex: str


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _panels(panels: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every panel, those inside a row (collapsed rows keep theirs under ``panels``) too."""
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def targets(dashboard: Mapping[str, Any]) -> list[Target]:
    """Every query a panel draws (hidden ones left out, as Grafana leaves them out)."""
    found = []
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("hide") or not target.get("expr"):
                continue
            found.append(
                Target(
                    panel=str(panel.get("title", "?")),
                    ref_id=str(target.get("refId", "?")),
                    expr=str(target["expr"]),
                    instant_only=bool(target.get("instant")) and target.get("range") is False,
                )
            )
    return found


def variables(dashboard: Mapping[str, Any]) -> list[Variable]:
    """The dashboard's query variables, in the order Grafana expands them."""
    found = []
    for item in dashboard.get("templating", {}).get("list", []):
        if item.get("type") != "query":
            continue
        query = item.get("query")
        if isinstance(query, dict):  # newer Grafana stores {"query": "...", "refId": ...}
            query = query.get("query", "")
        found.append(
            Variable(
                name=str(item["name"]),
                query=str(query),
                multi=bool(item.get("multi")),
                include_all=bool(item.get("includeAll")),
                all_value=item.get("allValue") or None,
                regex=str(item.get("regex") or ""),
            )
        )
    return found


def special_regex_escape(value: str) -> str:
    """Grafana's prometheusSpecialRegexEscape (the classic behaviour, no feature toggle)."""
    return REGEX_META.sub(lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


def regular_escape(value: str) -> str:
    """Grafana's prometheusRegularEscape (the classic behaviour)."""
    return value.replace("\\", "\\\\").replace("'", "\\\\'")


def format_value(variable: Variable, values: Sequence[str]) -> str:
    """interpolateQueryExpr: how the variable's selected values are written into a query."""
    if not variable.multi and not variable.include_all:
        return regular_escape(values[0]) if values else ""
    escaped = [special_regex_escape(v) for v in values]
    if len(escaped) == 1:
        return escaped[0]
    return "(" + "|".join(escaped) + ")"


@dataclass(frozen=True)
class TimeRange:
    """The dashboard's time range and the data source's scrape interval (its "timeInterval")."""

    start: float
    end: float
    scrape_s: float

    @property
    def interval_s(self) -> float:
        """$__interval: Grafana rounds range/maxDataPoints to a "nice" value, but never below the
        scrape interval; for ranges under MAX_DATA_POINTS scrape intervals (all ours) that lower
        bound is what it sends, and that is all this computes."""
        raw = (self.end - self.start) / MAX_DATA_POINTS
        assert raw <= self.scrape_s, "a range this long needs Grafana's interval rounding"
        return self.scrape_s

    def builtins(self) -> dict[str, str]:
        interval = self.interval_s
        rate = max(interval + self.scrape_s, 4 * self.scrape_s)
        span = math.ceil(self.end - self.start)
        return {
            "__interval": _duration(interval),
            "__interval_ms": str(round(interval * 1000)),
            "__rate_interval": _duration(rate),
            "__range": f"{span}s",
            "__range_s": str(span),
            "__range_ms": str(span * 1000),
        }


def _duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms" if seconds % 1 else f"{int(seconds)}s"


def interpolate(
    expr: str,
    selected: Mapping[str, tuple[Variable, Sequence[str]]],
    builtins: Mapping[str, str],
) -> str:
    """``expr`` with every variable replaced as Grafana replaces it; an unknown one is an error
    (Grafana would send it as written and Prometheus would refuse the query or match nothing)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        fmt = match.group(3)
        if name in builtins:
            return builtins[name]
        if name not in selected:
            raise KeyError(f"unknown variable ${name} in {expr!r}")
        variable, values = selected[name]
        if fmt not in (None, "regex"):
            raise KeyError(f"format {fmt!r} of ${name} is not supported here")
        return format_value(variable, values)

    return VARIABLE.sub(replace, expr)


class Prometheus:
    """The HTTP API calls Grafana's Prometheus data source makes."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, api: str, params: Sequence[tuple[str, str]]) -> Any:
        query = urllib.parse.urlencode(list(params))
        with urllib.request.urlopen(f"{self.url}{api}?{query}", timeout=self.timeout_s) as reply:
            body = json.loads(reply.read())
        assert body.get("status") == "success", body
        return body["data"]

    def label_values(self, metric: str, label: str, span: TimeRange) -> list[str]:
        series = self._get(
            "/api/v1/series",
            [("match[]", metric), ("start", f"{span.start:.3f}"), ("end", f"{span.end:.3f}")],
        )
        return sorted({s[label] for s in series if s.get(label)})

    def instant(self, expr: str, at: float) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query", [("query", expr), ("time", f"{at:.3f}")])
        result: list[dict[str, Any]] = data["result"]
        return result

    def range(self, expr: str, span: TimeRange) -> list[dict[str, Any]]:
        # Grafana aligns start and end to the step
        step = span.interval_s
        start = math.floor(span.start / step) * step
        end = math.floor(span.end / step) * step
        data = self._get(
            "/api/v1/query_range",
            [("query", expr), ("start", str(start)), ("end", str(end)), ("step", str(step))],
        )
        result: list[dict[str, Any]] = data["result"]
        return result


def expand(
    prometheus: Prometheus,
    dashboard: Mapping[str, Any],
    span: TimeRange,
    choose: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, tuple[Variable, list[str]]]:
    """Every query variable's selected values: "All" (every value), or ``choose[name]``."""
    selected: dict[str, tuple[Variable, list[str]]] = {}
    for variable in variables(dashboard):
        query = interpolate(variable.query, selected, span.builtins())
        match = LABEL_VALUES.match(query)
        assert match, f"${variable.name}: only label_values(metric, label) is supported: {query}"
        values = prometheus.label_values(match["metric"], match["label"], span)
        if variable.regex:
            values = [v for v in values if re.search(variable.regex, v)]
        assert variable.all_value is None, "a custom All value is not what these dashboards use"
        wanted = (choose or {}).get(variable.name)
        if wanted is not None:
            assert set(wanted) <= set(values), (variable.name, wanted, values)
            values = list(wanted)
        selected[variable.name] = (variable, values)
    return selected


def run(
    prometheus: Prometheus,
    dashboard: Mapping[str, Any],
    target: Target,
    span: Callable[[], TimeRange],
    mode: str,
    choose: Mapping[str, Sequence[str]] | None = None,
    tries: int = 3,
) -> tuple[str, list[dict[str, Any]]]:
    """``target`` expanded and run as an ``instant`` or ``range`` query: (query, result).

    An empty answer is asked again a second later (``tries`` times in all) while some scrape
    target was down at that moment: on a loaded test box a scrape can miss its 1 s timeout, and
    Prometheus then marks every series of that target stale until its next scrape, as a
    dashboard would show it too for that second.
    """
    for attempt in range(tries):
        now = span()
        selected = expand(prometheus, dashboard, now, choose)
        expr = interpolate(target.expr, selected, now.builtins())
        if mode == "instant":
            result = prometheus.instant(expr, now.end)
        else:
            result = prometheus.range(expr, now)
        missed = prometheus.instant("min_over_time(up[1m]) == 0", now.end)
        if result or not missed or attempt == tries - 1:
            return expr, result
        time.sleep(1.0)
    raise AssertionError("unreachable")
