"""JSON form of a graph with a schema version; ``load(dump(g)) == g`` exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamplan.errors import FileFormatError
from streamplan.ir.graph import Graph, Node, Value

SCHEMA = "streamplan.graph"
SCHEMA_VERSION = 1


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "name": graph.name,
        "inputs": list(graph.inputs),
        "params": list(graph.params),
        "outputs": list(graph.outputs),
        "meta": dict(graph.meta),
        **({"param_names": dict(graph.param_names)} if graph.param_names else {}),
        **({"roles": dict(graph.roles)} if graph.roles else {}),
        "values": [
            {
                "id": v.id,
                "shape": list(v.shape),
                "dtype": v.dtype,
                "nbytes": v.nbytes,
                "kind": v.kind,
                **({"storage": v.storage} if v.is_alias else {}),
            }
            for v in graph.values.values()
        ],
        "nodes": [
            {
                "id": n.id,
                "op": n.op,
                "inputs": list(n.inputs),
                "outputs": list(n.outputs),
                "attrs": n.attrs,
                "flops": n.flops,
                "bytes_read": n.bytes_read,
                "bytes_written": n.bytes_written,
                **({"mutates": list(n.mutates)} if n.mutates else {}),
                **({"after": list(n.after)} if n.after else {}),
            }
            for n in graph.nodes
        ],
    }


def graph_from_dict(data: Any, *, source: str = "<dict>") -> Graph:
    """Build a graph from its JSON form; malformed input raises ``FileFormatError``."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise FileFormatError(
            f'not a streamplan graph (expected "schema": "{SCHEMA}")',
            where=source,
            hint="write graphs with `streamplan export MODEL -o graph.json`",
        )
    if data.get("version") != SCHEMA_VERSION:
        raise FileFormatError(
            f"graph schema version {data.get('version')!r} is not supported (this streamplan reads {SCHEMA_VERSION})",
            where=source,
        )
    try:
        values = {}
        for v in data["values"]:
            values[v["id"]] = Value(
                id=str(v["id"]),
                shape=tuple(int(d) for d in v["shape"]),
                dtype=str(v["dtype"]),
                nbytes=int(v["nbytes"]),
                kind=v.get("kind", "activation"),
                storage=v.get("storage", ""),
            )
        nodes = tuple(
            Node(
                id=str(n["id"]),
                op=str(n["op"]),
                inputs=tuple(n["inputs"]),
                outputs=tuple(n["outputs"]),
                attrs=dict(n.get("attrs", {})),
                flops=int(n.get("flops", 0)),
                bytes_read=int(n.get("bytes_read", 0)),
                bytes_written=int(n.get("bytes_written", 0)),
                mutates=tuple(n.get("mutates", ())),
                after=tuple(n.get("after", ())),
            )
            for n in data["nodes"]
        )
        meta = dict(data.get("meta", {}))
        # files written before param_names was a field of its own kept it in meta
        param_names = data.get("param_names", meta.pop("param_names", {}))
        return Graph(
            name=str(data.get("name", "graph")),
            nodes=nodes,
            values=values,
            inputs=tuple(data.get("inputs", ())),
            params=tuple(data.get("params", ())),
            outputs=tuple(data.get("outputs", ())),
            meta=meta,
            param_names={str(k): str(v) for k, v in dict(param_names).items()},
            roles={str(k): str(v) for k, v in dict(data.get("roles", {})).items()},  # optional: older files
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise FileFormatError(
            f"malformed graph JSON ({type(e).__name__}: {e})",
            where=source,
            hint="the file must follow the streamplan.graph schema",
        ) from None


def dumps(graph: Graph) -> str:
    return json.dumps(graph_to_dict(graph), separators=(",", ":"))


def loads(text: str, *, source: str = "<string>") -> Graph:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise FileFormatError(f"not valid JSON: {e}", where=source) from None
    return graph_from_dict(data, source=source)


def save(graph: Graph, path: str | Path) -> None:
    Path(path).write_text(dumps(graph))


def load(path: str | Path) -> Graph:
    from streamplan.files import read_json

    return graph_from_dict(read_json(path), source=str(path))
