"""The JSON-RPC envelope of a message to the MCP endpoint, checked where the ``mcp`` transport would mishandle it.

The transport validates a message against a union of request, notification and response models. Some
kinds of message fall through it badly:

- A request whose ``id`` is not a string or an integer (``null``, ``true``, ``1.5``, an object) matches
  none of the request models but does match the notification model, which ignores the stray ``id``: the
  transport answers 202 with no body and the call is never made. The client waits for an answer that never
  comes, and a ``send_dm`` is silently dropped. JSON-RPC 2.0 answers such a request with Invalid Request;
  MCP adds that an id is a string or an integer and never null.
- Anything else that is not one message (a batch, which MCP no longer has; a number; an object without
  ``method``, ``result`` or ``error``) is answered with pydantic's report of every model it failed, a few
  kilobytes that quote the input, under "Invalid params".

- A message naming one member twice in an object (``json_names``): the transport keeps the last value.
- A response carrying both a result and an error (JSON-RPC 2.0 forbids it), an error whose code is
  ``false`` (pydantic reads it as 0) or whose id is null, or ``params`` that are not an object: the
  transport accepts it (202).

Each is answered here with JSON-RPC's Invalid Request (-32600), ``id`` null, and one sentence. Valid
messages, and text that is not JSON (the transport's Parse error is already clear), go on unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from adapters import json_names

INVALID_REQUEST = -32600
_ID_RULE = "id must be a string or an integer (MCP: never null)"


def refusal(raw: bytes) -> dict[str, Any] | None:
    """The error document to answer instead of passing ``raw`` on, or None to pass it on."""
    try:
        message = json_names.loads(raw)
    except json_names.DuplicateName as duplicate:  # which of the two would a tool call act on?
        return _invalid(f"the message {json_names.twice(duplicate.name)}")
    except ValueError:
        return None  # not JSON: the transport's Parse error (-32700) says so
    if isinstance(message, list):
        return _invalid("batches are not supported: send one JSON-RPC message per request")
    if not isinstance(message, dict):
        return _invalid("a JSON-RPC message is a JSON object")
    if message.get("jsonrpc") != "2.0":
        return _invalid('a JSON-RPC 2.0 message has "jsonrpc": "2.0"')
    if "params" in message and not isinstance(message["params"], dict):  # on any message, as documented
        return _invalid("params must be an object (MCP names every parameter)")
    if "method" in message:
        if not isinstance(message["method"], str):
            return _invalid("method must be a string")
        if "result" in message or "error" in message:
            return _invalid("a request or a notification carries no result or error")
        if "id" in message and not _is_request_id(message["id"]):
            return _invalid(_ID_RULE)
    elif "result" not in message and "error" not in message:
        return _invalid("a JSON-RPC message has a method (a request or a notification), or a result or an error")
    elif "result" in message and "error" in message:  # a response, which the transport would take and drop
        return _invalid("a response carries a result or an error, not both")
    elif not _is_request_id(message.get("id")):  # a response names the request it answers (an error too)
        return _invalid(_ID_RULE)
    elif isinstance(error := message.get("error"), dict) and "code" in error and not _is_integer(error["code"]):
        return _invalid("an error's code is an integer")  # pydantic takes ``false`` for 0
    return None


def tidy(answer: bytes) -> bytes:
    """The transport's answer to a message refused by its models, shortened: a message ``refusal`` let
    through can still fail them (a response with a malformed ``error``), and pydantic's report would follow."""
    try:
        document = json.loads(answer)
        said = document["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return answer
    if not isinstance(said, str) or not said.startswith("Validation error"):
        return answer
    return json.dumps(_invalid("not a valid JSON-RPC 2.0 message")).encode()


def _is_request_id(value: object) -> bool:
    return isinstance(value, str) or _is_integer(value)


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _invalid(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": f"Invalid Request: {message}"}}
