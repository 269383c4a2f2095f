"""What one data operation is (``Operation``, with its REST route ``Http``): the type of each entry of the
registry in ``adapters/operations.py``, and what the REST resource, the MCP tool and the OpenAPI document
read from it — which arguments go in the path, the query or the body, and how the core's typed command is
made from them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from mcp_types import ToolAnnotations

from adapters.commands import command_fields, structure_body, structure_query
from adapters.schemas import Result, Schema, result_schema
from community_api.access import Actor
from community_api.deps import Deps
from community_api.errors import InvalidRequest

# ``run(deps, actor, args, command)``: ``args`` the operation's arguments as they came (path and query on
# REST, as text; typed on MCP), which the core checks where they name something on the platform;
# ``command`` the operation's typed command (``Operation.command``), structured from REST's JSON body or
# query, or from the MCP arguments that stand for them (``adapters/commands.py``), or None.
Run = Callable[[Deps, Actor, Mapping[str, Any], Any], object]


@attrs.frozen
class Http:
    """The operation's REST route. ``where`` places each argument that is not a body field (on POST) or a
    query parameter (on GET and DELETE): ``{"group": ("path", "gid")}``; ``idempotencyKey`` is always the
    ``Idempotency-Key`` header."""

    method: str
    path: str
    status: int
    where: Mapping[str, tuple[str, str]] = attrs.field(factory=dict)


@attrs.frozen
class Operation:
    name: str
    title: str
    scope: str
    description: str
    input_schema: Schema
    result: Result
    annotations: ToolAnnotations
    run: Run
    http: Http
    # Creating tools take an optional ``idempotencyKey``, the counterpart of REST's Idempotency-Key header.
    creates: bool = False
    # The core's typed command (an attrs class) that the body of a POST, or the query of a GET, becomes.
    command: type | None = None

    def execute(self, deps: Deps, actor: Actor, args: Mapping[str, Any], body: object, *, text: bool) -> object:
        """Structure the command (``body``: REST's JSON body or the MCP arguments REST takes in the body;
        ``text``: ``args`` are a query string's text) and run the operation."""
        return self.run(deps, actor, args, self.structure(args, body, text=text))

    def structure(self, args: Mapping[str, Any], body: object, *, text: bool) -> Any:
        """The operation's typed command (None when it takes none), or the core's ``InvalidRequest``."""
        if self.command is None:
            return None
        if self.http.method == "POST":
            return structure_body(body, self.command)
        names = command_fields(self.command)
        return structure_query({n: v for n, v in args.items() if n in names}, self.command, text=text)

    def core_refusal(self, arguments: Mapping[str, Any]) -> InvalidRequest | None:
        """The core's refusal of an MCP call's arguments, in its own words, if it refuses them."""
        try:
            self.structure(arguments, self.body_of(arguments), text=False)
        except InvalidRequest as refusal:
            return refusal
        return None

    @property
    def output_schema(self) -> Schema:
        return result_schema(self.result)

    def body_fields(self) -> tuple[str, ...]:
        """The arguments REST takes in the JSON body: on POST, those not placed elsewhere."""
        if self.http.method != "POST":
            return ()
        return tuple(
            arg for arg in self.input_schema["properties"] if arg not in self.http.where and arg != "idempotencyKey"
        )

    def query_args(self) -> tuple[tuple[str, str], ...]:
        """``(argument, REST query parameter)`` pairs, in the schema's order."""
        placed = dict(self.http.where)
        body = self.body_fields()
        return tuple(
            (arg, placed[arg][1] if arg in placed else arg)
            for arg in self.input_schema["properties"]
            if arg != "idempotencyKey" and arg not in body and placed.get(arg, ("query", ""))[0] == "query"
        )

    def path_args(self) -> tuple[tuple[str, str], ...]:
        """``(argument, REST path field)`` pairs."""
        return tuple((arg, name) for arg, (where, name) in self.http.where.items() if where == "path")

    def body_of(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The body an MCP call writes: its arguments that REST takes in the body."""
        return {name: args[name] for name in self.body_fields() if name in args}
