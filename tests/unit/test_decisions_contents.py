"""``docs/decisions.md`` opens with a list of its sections, each linked by the anchor GitHub gives its
heading, in the order they come: the list is how the next engineer finds a decision among sixty, so it
must name every section and nothing else. On a mismatch the failure prints the list to paste."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "decisions.md"
CONTENTS = "## Contents"


def anchor(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor for a heading: lower case, every character but letters, digits, spaces, hyphens and
    underscores dropped, spaces made hyphens; a repeat gets ``-1``, ``-2``..."""
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def expected_contents(text: str) -> list[str]:
    seen: dict[str, int] = {}
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ") and line != CONTENTS]
    return [f"- [{heading}](#{anchor(heading, seen)})" for heading in headings]


def test_the_contents_list_every_section_in_order() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert CONTENTS in text.splitlines(), f"docs/decisions.md has no {CONTENTS!r} section"
    listed = text.split(CONTENTS + "\n", 1)[1].split("\n## ", 1)[0].strip().splitlines()
    wanted = expected_contents(text)
    assert listed == wanted, "the contents of docs/decisions.md should read:\n" + "\n".join(wanted)


def test_anchors_are_githubs() -> None:
    seen: dict[str, int] = {}
    assert anchor("MCP endpoint (`adapters/mcp/`) — departures from DESIGN §8", seen) == (
        "mcp-endpoint-adaptersmcp--departures-from-design-8"
    )
    assert (
        anchor("The platform's 429 and the read pace (issue 9)", seen) == "the-platforms-429-and-the-read-pace-issue-9"
    )
    assert (
        anchor("cgroup v1's memory limit read too (session 41)", seen) == "cgroup-v1s-memory-limit-read-too-session-41"
    )
    assert anchor("Feed", seen) == "feed" and anchor("Feed", seen) == "feed-1"
