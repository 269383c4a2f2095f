"""The MCP argument check's pattern rule: the stock JSON Schema validator (Python's ``re.search``, whose ``$``
also matches before a final newline) against ours (a final ``$`` read as ``\\Z``, as ECMA-262 reads it),
side by side in one run over the same arguments. Prints microseconds per check of each and their ratio.

    .venv/bin/python scripts/bench/mcp_argument_check.py [--checks 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.mcp.arguments import WholeValuePatternValidator  # noqa: E402
from community_api.platform_ids import GROUP_PATTERN, PLATFORM_ID_PATTERN  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "postId": {"type": "string", "pattern": PLATFORM_ID_PATTERN},
        "group": {"type": "string", "pattern": GROUP_PATTERN},
    },
    "required": ["postId"],
    "additionalProperties": False,
}
ARGUMENTS = {"postId": "1ee42ce3fb9b0f572d51d8c03081f25c", "group": "builders-club"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, float] = {}
    for name, validator in (
        ("stock", Draft202012Validator(SCHEMA)),
        ("whole-value", WholeValuePatternValidator(SCHEMA)),
    ):
        assert not list(validator.iter_errors(ARGUMENTS))

        def check(checked: Any = validator) -> None:
            list(checked.iter_errors(ARGUMENTS))

        best = min(timeit.repeat(check, number=args.checks, repeat=args.rounds))
        figures[name] = best / args.checks * 1e6
        print(f"{name:12s} {figures[name]:6.2f} µs per check")
    print(f"ratio whole-value / stock: {figures['whole-value'] / figures['stock']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
