"""Every answer of the data API carries ``Cache-Control: no-store``, errors included: it holds the connected
account's own feed, posts and DM inbox, and a cache in between that keys on the URL alone (nginx's
``proxy_cache``) would otherwise serve one key's inbox to the next key asking (``adapters/http/no_store.py``;
through nginx: ``tests/e2e/test_behind_nginx.py``). The management API's answers: test_api_management.py."""

from __future__ import annotations

from adapters.operations import OPERATIONS
from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"


def test_every_data_operation_answers_with_no_store(ready: Ready) -> None:
    world, key = ready.world, ready.key
    answers = {
        "whoami": world.get("/v1/whoami", key),
        "list_groups": world.get("/v1/groups", key),
        "get_group": world.get("/v1/groups/builders-club", key),
        "get_feed": world.get(FEED, key),
    }
    post = world.post(FEED, key, {"title": "Kept by no cache"})
    answers["create_post"] = post
    comment = world.post(f"/v1/posts/{post.json['id']}/comments", key, {"content": "Nor this"})
    answers["create_comment"] = comment
    answers["get_post"] = world.get(f"/v1/posts/{post.json['id']}", key)
    answers["list_comments"] = world.get(f"/v1/posts/{post.json['id']}/comments", key)
    answers["delete_comment"] = world.delete(f"/v1/comments/{comment.json['id']}", key)
    answers["delete_post"] = world.delete(f"/v1/posts/{post.json['id']}", key)
    inbox = world.get("/v1/dms", key)
    answers["list_dms"] = inbox
    conversation = inbox.json["conversations"][0]["id"]
    answers["get_dm_thread"] = world.get(f"/v1/dms/{conversation}", key)
    answers["send_dm"] = world.post("/v1/dms", key, {"conversationId": conversation, "content": "hello"})

    assert set(answers) == {operation.name for operation in OPERATIONS}  # a new operation joins this list
    for name, answer in answers.items():
        assert answer.status_code < 300, (name, answer.status_code, answer.text)
        assert answer.headers.get("Cache-Control") == "no-store", name


def test_refusals_of_the_data_api_answer_with_no_store(ready: Ready) -> None:
    world = ready.world
    refusals = [
        world.client.simulate_get("/v1/dms"),  # no key: 401
        world.get("/v1/dms", "cda_" + "x" * 40),  # an unknown key: 401
        world.get(FEED, ready.key, params={"pages": "99"}),  # 400
        world.get("/v1/posts/" + "0" * 32, ready.key),  # 404
        world.client.simulate_put("/v1/dms", headers={"Authorization": f"Bearer {ready.key}"}),  # 405
    ]
    for answer in refusals:
        assert answer.status_code >= 400
        assert answer.headers.get("Cache-Control") == "no-store", (answer.status_code, answer.text)


def test_head_on_a_data_route_answers_with_no_store(ready: Ready) -> None:
    answer = ready.world.client.simulate_head("/v1/dms", headers={"Authorization": f"Bearer {ready.key}"})
    assert answer.status_code == 200 and answer.headers.get("Cache-Control") == "no-store"


def test_public_answers_stay_cacheable(ready: Ready) -> None:
    """What is the same for every caller keeps the caching it had: the OpenAPI document, the stylesheet."""
    assert "no-store" not in ready.world.client.simulate_get("/v1/openapi.json").headers.get("Cache-Control", "")
