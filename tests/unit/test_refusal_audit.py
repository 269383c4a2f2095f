"""Refused key and token uses reach the audit table at a rate no stranger can drive: the shape of a key is
public (its checksum is a CRC-32), so forged well-formed keys cost a sender nothing, and one audit row
each let one client fill the disk. At most one row per bucket a minute; the next row counts the rest."""

from __future__ import annotations

from community_api import keys
from community_api.model import AuditEvent
from community_api.oauth import ACCESS_PREFIX
from community_api.refusal_audit import RefusalAudit
from fakes.clock import FakeClock
from tests.unit.web_support import HOST
from tests.unit.world_support import Ready, World


class RecordedAudit:
    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    def add_audit(self, event: AuditEvent) -> None:
        self.events.append(event)


def refusal(
    clock: FakeClock, key_id: str | None = None, detail: str = "unknown", subject: str = "AbCdEfGh"
) -> AuditEvent:
    return AuditEvent(at=clock.now(), event="key.refused", key_id=key_id, subject=subject, detail=detail)


def test_unknown_values_write_one_line_a_minute_and_the_next_counts_the_rest() -> None:
    clock, audit, refusals = FakeClock(), RecordedAudit(), RefusalAudit()
    written = [refusals.record(audit, refusal(clock, subject=f"p{n:07d}")) for n in range(1000)]
    assert written.count(True) == 1 and written[0]
    clock.advance(seconds=59)
    assert not refusals.record(audit, refusal(clock))
    clock.advance(seconds=1)
    assert refusals.record(audit, refusal(clock, subject="later"))
    assert [(e.subject, e.detail) for e in audit.events] == [
        ("p0000000", "unknown"),
        ("later", "unknown; 1000 more since the previous line"),
    ]
    clock.advance(minutes=5)
    assert refusals.record(audit, refusal(clock))
    assert audit.events[-1].detail == "unknown"  # nothing was left unwritten in between


def test_a_known_keys_refusal_is_written_while_unknown_values_flood() -> None:
    clock, audit, refusals = FakeClock(), RecordedAudit(), RefusalAudit()
    for _ in range(500):
        refusals.record(audit, refusal(clock))
    assert refusals.record(audit, refusal(clock, key_id="key_a", detail="revoked"))
    assert refusals.record(audit, refusal(clock, key_id="key_b", detail="revoked"))
    assert not refusals.record(audit, refusal(clock, key_id="key_a", detail="revoked"))
    # The same key refused for another reason is news to its owner.
    assert refusals.record(audit, refusal(clock, key_id="key_a", detail="expired"))
    assert [(e.key_id, e.detail) for e in audit.events] == [
        (None, "unknown"),
        ("key_a", "revoked"),
        ("key_b", "revoked"),
        ("key_a", "expired"),
    ]


def test_tokens_and_keys_have_buckets_of_their_own() -> None:
    clock, audit, refusals = FakeClock(), RecordedAudit(), RefusalAudit()
    assert refusals.record(audit, refusal(clock))
    token = AuditEvent(at=clock.now(), event="oauth.token_refused", subject="cdo_x", detail="unknown")
    assert refusals.record(audit, token)
    assert not refusals.record(audit, token)


def test_past_its_bound_the_longest_quiet_bucket_is_forgotten() -> None:
    clock, audit, refusals = FakeClock(), RecordedAudit(), RefusalAudit(max_buckets=2)
    for key_id in ("key_a", "key_b", "key_c"):  # key_a is forgotten when key_c arrives
        assert refusals.record(audit, refusal(clock, key_id=key_id, detail="revoked"))
    assert refusals.record(audit, refusal(clock, key_id="key_a", detail="revoked"))
    assert not refusals.record(audit, refusal(clock, key_id="key_c", detail="revoked"))
    assert len(audit.events) == 4


def test_a_bucket_written_again_is_no_longer_the_longest_quiet() -> None:
    """The bucket forgotten is the one whose last line is oldest, not the one first seen: a dead key still in
    use a minute later keeps its bucket (and its count) when a new one arrives."""
    clock, audit, refusals = FakeClock(), RecordedAudit(), RefusalAudit(max_buckets=2)
    assert refusals.record(audit, refusal(clock, key_id="key_a", detail="revoked"))
    clock.advance(seconds=1)
    assert refusals.record(audit, refusal(clock, key_id="key_b", detail="revoked"))
    clock.advance(seconds=60)
    assert refusals.record(audit, refusal(clock, key_id="key_a", detail="revoked"))  # key_a written again
    assert refusals.record(audit, refusal(clock, key_id="key_c", detail="revoked"))  # key_b is forgotten
    assert not refusals.record(audit, refusal(clock, key_id="key_a", detail="revoked"))  # key_a's bucket held
    assert refusals.record(audit, refusal(clock, key_id="key_b", detail="revoked"))  # key_b's came back
    assert [e.key_id for e in audit.events] == ["key_a", "key_b", "key_a", "key_c", "key_b"]


def _refused_rows(world: World, event: str, subjects: list[str]) -> int:
    return sum(1 for e in world.store.audit_trail() if e.event == event and e.subject in set(subjects))


def test_forged_well_formed_keys_answer_401_and_write_one_line(world: World) -> None:
    forged = [keys.new_secret(keys.KEY_PREFIX) for _ in range(200)]
    assert all(keys.has_valid_shape(value) for value in forged)
    assert {world.get("/v1/whoami", value).status_code for value in forged} == {401}
    assert _refused_rows(world, "key.refused", [keys.display_prefix(v) for v in forged]) == 1
    world.clock.advance(minutes=1)
    assert world.get("/v1/whoami", forged[0]).status_code == 401
    assert _refused_rows(world, "key.refused", [keys.display_prefix(v) for v in forged]) == 2


def test_a_revoked_keys_use_reaches_its_owners_trail_once_a_minute(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    world.client.simulate_delete(f"/v1/keys/{minted['id']}", headers=ready.browser.headers())
    for _ in range(50):
        assert world.get("/v1/whoami", minted["secret"]).status_code == 401
    world.clock.advance(minutes=1)
    assert world.get("/v1/whoami", minted["secret"]).status_code == 401
    refused = [e for e in world.store.list_audit(ready.browser.account["id"]) if e.event == "key.refused"]
    assert [(e.key_id, e.detail) for e in refused] == [
        (minted["id"], "revoked"),
        (minted["id"], "revoked; 49 more since the previous line"),
    ]


def test_forged_access_tokens_at_the_mcp_endpoint_write_one_line(world: World) -> None:
    forged = [keys.new_secret(ACCESS_PREFIX) for _ in range(100)]
    for value in forged:
        result = world.client.simulate_post(
            "/v1/mcp",
            headers={"Authorization": f"Bearer {value}", "Host": HOST},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
        assert result.status_code == 401
    subjects = [value[: len(ACCESS_PREFIX) + 8] for value in forged]
    assert _refused_rows(world, "oauth.token_refused", subjects) == 1
