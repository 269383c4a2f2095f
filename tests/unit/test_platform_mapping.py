"""The platform JSON readers of the Selenium gateway: the quick paths for the common shapes answer what
the full checks answer, and the memo of authors never lets a record through that the checks refuse."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest

from adapters.platform import platform_mapping as m
from adapters.platform.platform_answers import Resp
from community_api.errors import ConnectionExpired, PlatformError
from community_api.model import Post


def test_text_readers_keep_their_rules() -> None:
    record = {"id": "p1", "n": 7, "empty": "", "flag": True, "none": None, "snake_name": "s"}
    assert m.text(record, "id") == "p1" and m.text(record, "n") == "7"
    assert m.text(record, "camelName", "snake_name") == "s"
    assert m.text(record, "none", default="d") == "d"
    for name in ("flag", "none"):
        with pytest.raises(PlatformError):
            m.text(record, name)
    assert m.optional_text(record, "id") == "p1" and m.optional_text(record, "n") == "7"
    assert m.optional_text(record, "empty") is None and m.optional_text(record, "flag") is None


def test_number_keeps_its_rules() -> None:
    record = {
        "i": 3,
        "b": True,
        "f": 2.0,
        "s": " 12 ",
        "none": None,
        "bad": "x",
        "half": 1.5,
        # Digits to str.isdigit() that int() refuses, or reads as numbers no platform writes.
        "superscript": "²",
        "circled": "①",
        "arabic": "٣",
        "inf": float("inf"),
        "nan": float("nan"),
    }
    assert [m.number(record, k) for k in ("i", "b", "f", "s", "none", "missing")] == [3, 1, 2, 12, 0, 0]
    for name in ("bad", "half", "superscript", "circled", "arabic", "inf", "nan"):
        with pytest.raises(PlatformError):
            m.number(record, name)


def test_timestamps_are_utc_whatever_the_spelling() -> None:
    moment = datetime(2026, 11, 2, 10, 30, 0, 123456, tzinfo=UTC)
    for spelled in ("2026-11-02T10:30:00.123456Z", "2026-11-02T12:30:00.123456+02:00", "2026-11-02T10:30:00.123456"):
        parsed = m.timestamp({"t": spelled}, "t")
        assert parsed == moment and parsed.utcoffset() == timedelta(0)
    assert m.timestamp({"t": "2026-11-02T10:30:00.123456+00:00"}, "t").tzinfo is UTC


def post_record(n: int, author: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"p{n}",
        "name": f"post-{n}",
        "groupId": "g",
        "userId": author.get("id"),
        "labelId": "l",
        "createdAt": "2026-11-02T10:30:00.000000Z",
        "updatedAt": "2026-11-02T10:30:00.000000Z",
        "metadata": {"title": "T", "content": "C", "upvotes": 1, "comments": 0, "pinned": 0},
        "user": author,
    }


def test_authors_are_read_once_per_answer_and_each_record_still_checked() -> None:
    ann = {"id": "u1", "name": "ann", "firstName": "Ann", "lastName": "Lee", "metadata": {"x": 1}}
    authors: dict[tuple[Any, ...], Any] = {}
    first = m.post(post_record(1, dict(ann)), "https://x", "g", authors=authors)
    second = m.post(post_record(2, dict(ann)), "https://x", "g", authors=authors)
    assert first.author is second.author and first.author == m.user(ann)
    renamed = m.post(post_record(3, {**ann, "lastName": "Park"}), "https://x", "g", authors=authors)
    assert renamed.author is not None and renamed.author.name == "Ann Park"
    numeric = m.post(post_record(4, {**ann, "id": 7}), "https://x", "g", authors=authors)
    assert numeric.author is not None and numeric.author.id == "7"
    with pytest.raises(PlatformError):  # a bool is no id, even where "1" was read before
        m.post(post_record(5, {**ann, "id": True}), "https://x", "g", authors=authors)
    with pytest.raises(PlatformError):
        m.post(post_record(6, {**ann, "name": ["ann"]}), "https://x", "g", authors=authors)


# --- posts: the usual shape read in one go, any other field by field -------------------------------------
POST_FIELDS = (
    "id",
    "group_id",
    "title",
    "content",
    "label_id",
    "author_id",
    "author",
    "created_at",
    "updated_at",
    "upvotes",
    "comment_count",
    "pinned",
    "url",
)


def test_post_fields_are_in_the_order_usual_post_passes_them() -> None:
    assert tuple(field.name for field in attrs.fields(Post)) == POST_FIELDS


def usual_record() -> dict[str, Any]:
    """A feed post as page data spells it, every value distinct, so that a field read into the wrong place
    shows."""
    return {
        "id": "p1",
        "name": "post-one-p1",
        "postType": "generic",
        "groupId": "g1",
        "userId": "u1",
        "rootId": "p1",
        "labelId": "l1",
        "createdAt": "2026-11-02T10:30:00.123456Z",
        "updatedAt": "2026-11-03T08:00:00.5Z",
        "metadata": {
            "title": "Title",
            "content": "Content ☃",
            "comments": 4,
            "upvotes": 9,
            "labels": "l1",
            "pinned": 1,
            "hasNewComments": 0,
            "lastComment": 0,
            "imagePreview": "",
            "attachments": "",
        },
        "user": {
            "id": "u1",
            "name": "ann-lee",
            "firstName": "Ann",
            "lastName": "Lee",
            "metadata": {"pictureProfile": "x", "spData": "{}"},
        },
    }


def snake(record: dict[str, Any]) -> dict[str, Any]:
    """The same post as api2 spells it."""
    names = {
        "groupId": "group_id",
        "userId": "user_id",
        "rootId": "root_id",
        "labelId": "label_id",
        "createdAt": "created_at",
        "updatedAt": "updated_at",
        "postType": "post_type",
    }
    spelled = {names.get(key, key): value for key, value in record.items()}
    person = record.get("user")
    if isinstance(person, dict):
        spelled["user"] = {{"firstName": "first_name", "lastName": "last_name"}.get(k, k): v for k, v in person.items()}
    return spelled


def at(record: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """``record`` with the field at ``path`` (``a.b``) set to ``value``, or removed for MISSING."""
    changed = {**record, "metadata": dict(record["metadata"]), "user": dict(record["user"])}
    *parents, last = path.split(".")
    target = changed
    for parent in parents:
        target = target[parent]
    if value is MISSING:
        target.pop(last, None)
    else:
        target[last] = value
    return changed


MISSING = object()
PATHS = (
    "id",
    "name",
    "groupId",
    "labelId",
    "userId",
    "createdAt",
    "updatedAt",
    "metadata",
    "user",
    "metadata.title",
    "metadata.content",
    "metadata.upvotes",
    "metadata.comments",
    "metadata.pinned",
    "user.id",
    "user.name",
    "user.firstName",
    "user.lastName",
)
# A post read without the authors' map, and with an empty one.
NO_AUTHORS: tuple[m.Authors | None, ...] = (None, {})
VALUES: tuple[Any, ...] = (
    MISSING,
    None,
    True,
    False,
    0,
    7,
    -3,
    1.5,
    2.0,
    "",
    "x",
    " 12 ",
    "2026-11-02T12:30:00+02:00",
    "2026-11-02",
    "2026-11-02Z",
    "2026-13-45T00:00:00Z",
    "not a time",
    [],
    ["x"],
    {},
    {"id": "u2"},
)


def read(reader: Any, record: object, authors: dict[tuple[Any, ...], Any] | None) -> object:
    """What a reader makes of a record: the post as its repr (which shows time zones, unlike ==), or
    the error's class."""
    try:
        return repr(reader(record, "https://x", "club", authors=authors))
    except PlatformError:
        return PlatformError


def by_usual_post(record: object, platform_url: str, slug: str, *, authors: Any) -> Post:
    assert isinstance(record, dict)
    found = m.usual_post(record, platform_url, slug, authors)
    if found is None:
        raise LookupError("not the usual shape")
    return found


def test_the_usual_shape_is_read_in_one_go_as_field_by_field() -> None:
    record = usual_record()
    assert m.usual_post(record, "https://x", "club", None) is not None
    expected = Post(
        id="p1",
        group_id="g1",
        title="Title",
        content="Content ☃",
        label_id="l1",
        author_id="u1",
        author=m.PlatformUser(id="u1", handle="ann-lee", name="Ann Lee"),
        created_at=datetime(2026, 11, 2, 10, 30, 0, 123456, tzinfo=UTC),
        updated_at=datetime(2026, 11, 3, 8, 0, 0, 500000, tzinfo=UTC),
        upvotes=9,
        comment_count=4,
        pinned=True,
        url="https://x/club/post-one-p1",
    )
    for authors in NO_AUTHORS:
        assert m.post(record, "https://x", "club", authors=authors) == expected
        assert m.checked_post(record, "https://x", "club", authors=authors) == expected
        assert read(m.checked_post, snake(record), authors) == repr(expected)  # api2's spelling


@pytest.mark.parametrize("path", PATHS)
def test_any_change_to_a_field_reads_the_same_both_ways_or_fails_both_ways(path: str) -> None:
    shared: dict[tuple[Any, ...], Any] = {}  # as in a feed: one memo of authors for every record
    for value in VALUES:
        record = at(usual_record(), path, value)
        assert read(m.post, record, shared) == read(m.checked_post, record, None), (path, value)
        for authors in NO_AUTHORS:
            checked = read(m.checked_post, record, authors)
            try:
                usual = read(by_usual_post, record, authors)
            except LookupError:
                usual = checked  # not the usual shape: left to the field readers
            assert usual == checked, (path, value)
            assert read(m.post, record, authors) == checked, (path, value)
            assert read(m.post, snake(record), authors) == checked, (path, value)  # api2's spelling


def test_hostile_records_are_platform_errors_both_ways() -> None:
    hostile: list[dict[str, Any]] = [
        at(usual_record(), "id", True),
        at(usual_record(), "id", None),
        at(usual_record(), "id", ["p1"]),
        at(usual_record(), "groupId", MISSING),
        at(usual_record(), "groupId", {}),
        at(usual_record(), "metadata.upvotes", "many"),
        at(usual_record(), "metadata.comments", 1.5),
        at(usual_record(), "metadata.title", 3.5),
        at(usual_record(), "createdAt", "yesterday"),
        at(usual_record(), "createdAt", MISSING),
        at(usual_record(), "createdAt", 1700000000),
        at(usual_record(), "updatedAt", "2026-11-02T25:00:00Z"),
        at(usual_record(), "user.id", True),
        at(usual_record(), "user.name", None),
        at(usual_record(), "user.name", {"first": "ann"}),
    ]
    for record in hostile:
        for authors in NO_AUTHORS:
            with pytest.raises(PlatformError):
                m.post(record, "https://x", "club", authors=authors)
            with pytest.raises(PlatformError):
                m.checked_post(record, "https://x", "club", authors=authors)
    for data in (None, "post", ["p1"], 7):
        with pytest.raises(PlatformError):
            m.post(data, "https://x", "club")


def test_odd_but_readable_records_read_the_same_both_ways() -> None:
    odd = [
        at(usual_record(), "metadata.pinned", True),  # a bool where an int is usual: number() reads it
        at(usual_record(), "metadata.upvotes", " 12 "),
        at(usual_record(), "id", 7),
        at(usual_record(), "labelId", None),
        at(usual_record(), "labelId", ""),
        at(usual_record(), "updatedAt", ""),
        at(usual_record(), "updatedAt", "2026-11-02T10:30:00.123456Z"),
        at(usual_record(), "createdAt", "2026-11-02T12:30:00+02:00"),
        at(usual_record(), "user", "u1"),
        at(usual_record(), "user.lastName", None),
        at(usual_record(), "user.firstName", ["Ann"]),
        at(at(usual_record(), "user.firstName", ""), "user.lastName", ""),
        {**at(usual_record(), "labelId", None), "label_id": "l9"},  # a null camelCase name: its twin is read
    ]
    for record in odd:
        for authors in NO_AUTHORS:
            assert read(m.post, record, authors) == read(m.checked_post, record, authors) != PlatformError


def test_private_fields_of_the_author_never_reach_the_post() -> None:
    record = at(
        usual_record(),
        "user",
        {
            **usual_record()["user"],
            "email": "ann@x.test",
            "paymentMethods": [{"last4": "4242"}],
            "apiKeys": ["sk_live_x"],
        },
    )
    for reader in (m.post, m.checked_post):
        found = reader(record, "https://x", "club", authors={})
        assert found.author == m.PlatformUser(id="u1", handle="ann-lee", name="Ann Lee")
        assert "4242" not in repr(found) and "sk_live" not in repr(found) and "ann@x" not in repr(found)


def test_page_data_variants_for_signed_out_and_non_member_feeds() -> None:
    """PLATFORM.md: the about page in the feed's place, or Next's redirect to it (no postTrees), and a
    logged-out view (self null): the caller asks self which (``test_platform_feed_refusals.py``); notFound."""
    import pytest

    from community_api.errors import NotFound

    about = m.page_props({"pageProps": {"currentGroup": {"id": "g"}}, "__N_SSP": True}, "group g")
    assert m.is_about_page(about) and not m.is_signed_out_view(about)
    feed = m.page_props({"pageProps": {"postTrees": [], "self": {"id": "u"}}}, "group g")
    assert not m.is_about_page(feed) and not m.is_signed_out_view(feed)  # an empty feed of a member is a feed
    redirect = m.page_props({"pageProps": {"__N_REDIRECT": "/g/about", "__N_REDIRECT_STATUS": 307}}, "group g")
    assert m.is_about_page(redirect)
    signed_out = m.page_props({"pageProps": {"postTrees": [], "self": None}}, "group g")
    assert m.is_signed_out_view(signed_out) and not m.is_about_page(signed_out)
    with pytest.raises(NotFound):
        m.page_props({"notFound": True}, "group g")


@pytest.mark.parametrize(
    ("spelled", "micro"),
    [
        ("2024-11-08T12:14:36.1163Z", 116300),
        ("2024-11-07T23:26:18.04203Z", 42030),
        ("2024-11-07T23:28:36.995Z", 995000),
        ("2024-11-07T23:28:36.9Z", 900000),
        ("2024-11-07T23:28:36.0Z", 0),
    ],
)
def test_times_with_trimmed_fractions_are_read_exactly(spelled: str, micro: int) -> None:
    """PLATFORM.md: 1 to 6 fraction digits, trailing zeros trimmed."""
    assert m.timestamp({"t": spelled}, "t").microsecond == micro


def test_a_top_level_comment_names_the_post_or_nothing_and_a_reply_its_comment() -> None:
    """PLATFORM.md, captured shape (snake_case): ``parent_id`` of a top-level comment is the post's id or ""."""

    def record(cid: str, parent: str) -> dict[str, Any]:
        return {
            "id": cid,
            "post_type": "comment",
            "root_id": "p" * 32,
            "parent_id": parent,
            "user_id": "u" * 32,
            "created_at": "2024-11-08T12:14:36.1163Z",
            "metadata": {"content": "hi", "upvotes": 0},
        }

    assert m.comment(record("a" * 32, ""), "p" * 32).parent_id is None
    assert m.comment(record("b" * 32, "p" * 32), "p" * 32).parent_id is None
    assert m.comment(record("c" * 32, "a" * 32), "p" * 32).parent_id == "a" * 32
    # The post a comment belongs to: its own root_id, which the platform writes; the asked post without one.
    assert m.comment(record("d" * 32, ""), "q" * 32).post_id == "p" * 32
    rootless = {k: v for k, v in record("e" * 32, "").items() if k != "root_id"}
    assert m.comment(rootless, "q" * 32).post_id == "q" * 32


def test_a_group_is_named_by_its_slug_without_a_display_name_and_its_labels_by_the_list_given() -> None:
    record = {
        "id": "g" * 32,
        "name": "builders-club",
        "metadata": {"description": "d"},
        "labels": [{"id": "l" * 32, "metadata": {"display_name": "News", "posts": 2}}],
    }
    found = m.group(record)
    assert (found.name, found.slug, found.member_count) == ("builders-club", "builders-club", None)
    assert [(lb.id, lb.name, lb.post_count) for lb in found.labels] == [("l" * 32, "News", 2)]
    # The labels asked for apart, when given, are the group's: an empty list is no labels.
    assert m.group(record, labels=[]).labels == ()


def test_last_comment_in_nanoseconds_beyond_two_to_the_53_is_read_without_loss() -> None:
    """``lastComment`` is 19 digits. The page hands the answer over as text (never through the browser's
    JSON.parse, which would round it), and the reader keeps it exact, as text or as packed bytes."""
    author = {"id": "u1", "name": "alice", "firstName": "A", "lastName": "B"}
    record = post_record(1, author)
    record["metadata"]["lastComment"] = 1731068076116300123
    body = json.dumps({"pageProps": {"postTrees": [{"post": record}]}})
    for packed in (body, body.encode()):
        data = Resp(200, "application/json", packed).json()
        assert data["pageProps"]["postTrees"][0]["post"]["metadata"]["lastComment"] == 1731068076116300123
    assert float(1731068076116300123) != 1731068076116300123  # what a double would have made of it
    assert m.post(record, "https://x", "g").id == "p1"


# --- pinned comments: PLATFORM.md, "Posts and comments" (``pinned_post_tree?``) ----------------------------
ROOT = "f" * 32


def _comment_node(n: int, replies: int = 0, parent: str = ROOT, **metadata: object) -> dict[str, Any]:
    cid = f"{n:032x}"
    post = {
        "id": cid,
        "post_type": "comment",
        "root_id": ROOT,
        "parent_id": parent,
        "user_id": "a" * 32,
        "created_at": f"2026-11-01T10:00:{n:02d}.5Z",
        "metadata": {"content": f"comment {n}", **metadata},
    }
    return {"post": post, "children": [_comment_node(n * 10 + r + 1, parent=cid) for r in range(replies)]}


def _root_node(children: list[dict[str, Any]]) -> dict[str, Any]:
    root = {"id": ROOT, "post_type": "generic", "root_id": ROOT, "created_at": "2026-11-01T09:00:00Z"}
    return {"post": root, "children": children}


@pytest.mark.parametrize(
    ("answer", "pinned"),
    [
        ({}, []),
        ({"pinned_post_tree": None}, []),
        ({"pinned_post_tree": _comment_node(3, replies=1)}, [3]),  # the pinned comment's own tree
        ({"pinned_post_tree": _root_node([_comment_node(3, replies=1)])}, [3]),  # the post's tree holding it
        ({"pinned_post_tree": [_comment_node(3), _comment_node(4)]}, [3, 4]),  # a list of them
        ({"pinnedPostTree": _comment_node(3)}, [3]),
        ({"pinned_post_tree": _root_node([])}, []),
    ],
)
def test_a_pinned_comment_is_read_whichever_way_the_answer_holds_it(answer: dict[str, Any], pinned: list[int]) -> None:
    assert [n["post"]["id"] for n in m.pinned_trees(answer)] == [f"{n:032x}" for n in pinned]


COMMENT = "c" * 32


@pytest.mark.parametrize(
    ("record", "comment"),
    [
        ({"id": COMMENT, "post_type": "comment", "root_id": ROOT, "parent_id": ROOT}, True),
        ({"id": COMMENT, "postType": "comment"}, True),
        ({"id": COMMENT, "parent_id": ROOT}, True),
        # A top-level comment's parent_id may be "" (PLATFORM.md): with no post_type, its root tells.
        ({"id": COMMENT, "root_id": ROOT, "parent_id": ""}, True),
        ({"id": COMMENT, "rootId": ROOT}, True),
        ({"id": ROOT, "postType": "generic", "rootId": ROOT}, False),  # a post is its own root
        ({"id": ROOT, "post_type": "generic", "root_id": "", "parent_id": ""}, False),
        ({"id": ROOT}, False),
    ],
)
def test_a_comment_is_told_from_a_post_by_any_field_that_says_so(record: dict[str, Any], comment: bool) -> None:
    assert m.is_comment(record) is comment


@pytest.mark.parametrize(("body", "data"), [("", None), ("  \n", None), ("null", None), ("{}", {})])
def test_self_answered_empty_is_a_dead_session(body: str, data: object) -> None:
    """``api2/self`` of an expired session answers 200 with an empty body (PLATFORM.md); a body of ``null``
    or ``{}`` names no user either."""
    with pytest.raises(ConnectionExpired):
        m.self_user(body, data)


def test_pinned_comments_take_their_place_once_whether_the_pages_hold_them_or_not() -> None:
    pages = [_comment_node(1), _comment_node(2, replies=2), _comment_node(5)]
    cases = [
        ([_comment_node(3, replies=1)], [1, 2, 21, 22, 3, 31, 5]),  # apart from the pages: put in its place
        ([_comment_node(2, replies=2)], [1, 2, 21, 22, 5]),  # in the pages as well: listed once
    ]
    for pinned, order in cases:
        flat = m.flat_comments(pages, m.pinned_trees({"pinned_post_tree": pinned}), ROOT)
        assert [c.id for c in flat] == [f"{n:032x}" for n in order]
        assert [c.id for c in flat if c.pinned] == [pinned[0]["post"]["id"]]  # its replies are not pinned
    # a comment the platform marks pinned itself (``metadata.pinned``) says so too
    flat = m.flat_comments([_comment_node(1, pinned=1), _comment_node(2, pinned=0)], [], ROOT)
    assert [c.pinned for c in flat] == [True, False]
