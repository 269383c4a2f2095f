"""How the stand-in reads what a request brings, whatever route it is on: numbers in the query (empty means
the default, below the least or above the most is 400), a body that is not a JSON object, its 404s (JSON
on api2 and the control API, the 404 page elsewhere), and a cookie sent twice."""

from __future__ import annotations

import pytest
from falcon import testing

from tests.sandbox.conftest import Browser, user_id


@pytest.mark.parametrize(
    ("query", "status"),
    [("limit=&offset=", 200), ("offset=-1", 400), ("limit=0", 400), ("limit=31", 400), ("offset=x", 400)],
)
def test_numbers_in_the_query_are_checked_against_their_bounds(
    client: testing.TestClient, alice: Browser, query: str, status: int
) -> None:
    r = alice.get(f"/api2/users/{user_id(client, 'alice')}/groups", query_string=query)
    assert r.status_code == status
    if status == 200:
        assert [g["name"] for g in r.json["groups"]] == ["builders-club", "night-owls", "quiet-garden"]


@pytest.mark.parametrize("body", ["[]", '"text"', "3", "null"])
def test_a_body_that_is_not_a_json_object_is_an_invalid_body(alice: Browser, body: str) -> None:
    r = alice.post("/api2/posts", body=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json == {"message": "invalid body"}


@pytest.mark.parametrize("path", ["/api2/nothing-here", "/api2/no/such/route", "/__sandbox/no/such/action"])
def test_the_apis_answer_their_404_in_json(alice: Browser, path: str) -> None:
    r = alice.get(path)
    assert r.status_code == 404 and r.json == {"message": "not found"}


def test_of_a_cookie_sent_twice_the_first_counts(client: testing.TestClient, alice: Browser) -> None:
    """A browser sends the most specific cookie first (RFC 6265, 5.4)."""
    good = alice.cookies["auth_token"]
    cookies = f"aws-waf-token={alice.cookies['aws-waf-token']}; auth_token={good}; auth_token=stale"
    r = client.simulate_get("/api2/self", headers={"User-Agent": alice.user_agent, "Cookie": cookies})
    assert r.status_code == 200 and r.json["name"] == "alice"
