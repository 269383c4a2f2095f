"""Deterministic seed data for the stand-in platform.

``build_world(seed, now_us)`` gives the same ids, texts, upvotes, memberships, read state and chats for
the same seed; only the times move with ``now_us`` (the real time at start-up or reset), so the ``24h`` and
``7d`` windows always hold posts.

Fixed for every seed (same ids too): alice, bob, carol, dave (password ``sandbox``) and mallory, whose
login meets a two-factor prompt. Groups (``name`` is the slug, ``metadata.display_name`` the title):

- ``builders-club`` "Builders Club": the big one, 1,000+ posts over two years, six labels, three pinned
  posts; every user is a member, including about 200 chat-only members who are alice's DM partners.
- ``night-owls`` "Night Owls": alice, bob, carol, dave.
- ``quiet-garden`` "Quiet Garden": alice, bob, carol (dave is not a member: "action not permitted"); every
  fourth post has no label (``labels`` "").
- ``design-guild`` "Design Guild": bob, carol, dave (alice is not a member).
"""

from __future__ import annotations

import hashlib
import random

from scripts.sandbox.model import DAY_US, HOUR_US, US, Channel, Group, Label, Message, Post, User, World
from scripts.sandbox.seed_words import CHAT, FIRST, LAST, REPLIES, SENTENCES, TITLES, TOPICS

PASSWORD = "sandbox"
FIXED_USERS = [  # handle, first, last, 2FA
    ("alice", "Alice", "Andersen", False),
    ("bob", "Bob", "Brennan", False),
    ("carol", "Carol", "Castillo", False),
    ("dave", "Dave", "Dimitrov", False),
    ("mallory", "Mallory", "Moss", True),
]
# PLATFORM.md: a post's ``labels`` is "" when it has none. Every fourth post of this group has no label.
UNLABELLED_GROUP = "quiet-garden"
UNLABELLED_EVERY = 4
GROUPS = [  # slug, display name, description, labels, member handles (None: everyone), root posts
    (
        "builders-club",
        "Builders Club",
        "Makers shipping side projects together, one week at a time.",
        ["General", "Wins", "Questions", "Resources", "Introductions", "Events"],
        None,
        1200,
    ),
    (
        "night-owls",
        "Night Owls",
        "Late-night study sessions and accountability.",
        ["General", "Check-ins", "Off-topic"],
        ["alice", "bob", "carol", "dave"],
        80,
    ),
    (
        "quiet-garden",
        "Quiet Garden",
        "Slow gardening, seed swaps and photos.",
        ["General", "Seeds", "Photos"],
        ["alice", "bob", "carol"],
        50,
    ),
    (
        "design-guild",
        "Design Guild",
        "Critique circle for interface designers.",
        ["General", "Critique"],
        ["bob", "carol", "dave"],
        24,
    ),
]
READ_SHARE = {"alice": 0.6, "bob": 0.4, "carol": 0.2, "dave": 0.85, "mallory": 0.0}


def stable_id(*parts: object) -> str:
    return hashlib.md5(":".join(map(str, parts)).encode(), usedforsecurity=False).hexdigest()


def hexid(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def slugify(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)[:60]


def post_name(title: str, post_id: str) -> str:
    """The URL slug of a post: its title slugified plus a short suffix (the platform's ``name``)."""
    return f"{slugify(title) or 'post'}-{post_id[:8]}"


def _fixed_user(handle: str, first: str, last: str, two_fa: bool) -> User:
    h = stable_id("user", handle)
    return User(
        id=h,
        handle=handle,
        first_name=first,
        last_name=last,
        email=f"{handle}@sandbox.test",
        password=PASSWORD,
        points=int(h[:4], 16) % 900 + 50,
        level=int(h[4], 16) % 6 + 1,
        picture=f"https://assets.sandbox.test/avatars/{handle}.png",
        requires_2fa=two_fa,
        private={
            "paymentMethods": [
                {
                    "brand": "visa",
                    "last4": str(4000 + int(h[5:8], 16) % 999),
                    "expMonth": int(h[8], 16) % 12 + 1,
                    "expYear": 2029,
                }
            ],
            "apiKeys": [f"sk_live_{stable_id('key', handle)}"],
            "stripeCustomerId": f"cus_{h[:14]}",
        },
    )


def _members(rng: random.Random) -> list[User]:
    names = [(f, last) for f in FIRST for last in LAST]
    rng.shuffle(names)
    users = []
    for first, last in names[:200]:
        uid = hexid(rng)
        users.append(
            User(
                id=uid,
                handle=f"{first}-{last}-{rng.randint(1000, 9999)}".lower(),
                first_name=first,
                last_name=last,
                email=None,
                password=None,
                points=rng.randint(0, 3000),
                level=rng.randint(1, 9),
                picture=f"https://assets.sandbox.test/avatars/{uid[:12]}.png",
            )
        )
    return users


def _post_times(rng: random.Random, count: int, now_us: int) -> list[int]:
    """Creation times over two years: five in the last 24 h, 25 in the last 7 days, newest last."""
    recent = [now_us - rng.randint(HOUR_US, 22 * HOUR_US) for _ in range(min(5, count))]
    week = [now_us - rng.randint(DAY_US + HOUR_US, 7 * DAY_US - HOUR_US) for _ in range(min(20, count))]
    rest = [now_us - rng.randint(7 * DAY_US, 730 * DAY_US) for _ in range(count - len(recent) - len(week))]
    return sorted(recent + week + rest)


BUSY_GROUP_POSTS = 1000  # the big group holds the busy post
BUSY_TITLE = "The thread everyone answered"
BUSY_COMMENTS = 62  # top-level: three pages of 25


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.sample(SENTENCES, rng.randint(lo, hi)))


def _seed_group(world: World, rng: random.Random, group: Group, count: int, authors: list[str], pinned: int) -> None:
    weights = [8 if i < 5 else 1 for i in range(len(authors))]  # fixed users post more than members
    times = _post_times(rng, count, world.now_us)
    pin_at = set(rng.sample(range(max(pinned, count - 25)), pinned)) if pinned else set()
    for i, created in enumerate(times):
        pid = hexid(rng)
        title = rng.choice(TITLES).format(t=rng.choice(TOPICS), n=rng.randint(1, 52))
        post = Post(
            id=pid,
            name=post_name(title, pid),
            post_type="generic",
            group_id=group.id,
            user_id=rng.choices(authors, weights)[0],
            root_id=pid,
            parent_id="",
            label_id=rng.choice(group.labels).id,
            created_us=created,
            updated_us=created,
            title=title,
            content=_text(rng, 1, 4),
            upvotes=min(int(rng.paretovariate(1.3)) - 1 + rng.randint(0, 3), 400),
            pinned=i in pin_at,
            image_preview=f"https://assets.sandbox.test/img/{pid[:10]}.jpg" if rng.random() < 0.15 else "",
        )
        if group.slug == UNLABELLED_GROUP and i % UNLABELLED_EVERY == 1:
            post.label_id = ""  # PLATFORM.md: ``labels`` is "" for none (the label drawn above keeps the seed)
        world.add_post(post)
        if rng.random() < 0.55:
            _seed_comments(world, rng, post, authors)
        if count >= BUSY_GROUP_POSTS and i == count // 2:
            # One post with more top-level comments than a page of them (25), so that reading a post walks
            # the comment pages as on the real site. Its own generator leaves the rest of the seed as it was.
            post.title = BUSY_TITLE
            _seed_comments(world, random.Random(f"busy:{pid}"), post, authors, tops=BUSY_COMMENTS)


def _seed_comments(world: World, rng: random.Random, post: Post, authors: list[str], tops: int = 0) -> None:
    span = max(1, min(world.now_us - post.created_us, 30 * DAY_US))
    times = sorted(post.created_us + rng.randint(1, span) for _ in range(tops or rng.randint(1, 6)))
    for t in times:
        cid = hexid(rng)
        world.add_post(
            Post(
                id=cid,
                name=cid,
                post_type="comment",
                group_id=post.group_id,
                user_id=rng.choice(authors),
                root_id=post.id,
                parent_id=post.id,
                label_id=post.label_id,
                created_us=t,
                updated_us=t,
                title="",
                content=rng.choice(REPLIES + SENTENCES),
                upvotes=rng.randint(0, 6),
            )
        )
        rest = max(1, min(world.now_us - t, 5 * DAY_US))
        for rt in sorted(t + rng.randint(1, rest) for _ in range(rng.choice((0, 0, 1, 2, 3)))):
            rid = hexid(rng)
            world.add_post(
                Post(
                    id=rid,
                    name=rid,
                    post_type="comment",
                    group_id=post.group_id,
                    user_id=rng.choice(authors),
                    root_id=post.id,
                    parent_id=cid,
                    label_id=post.label_id,
                    created_us=rt,
                    updated_us=rt,
                    title="",
                    content=rng.choice(REPLIES),
                    upvotes=rng.randint(0, 3),
                )
            )


# A pinned comment (PLATFORM.md: the first comments page is asked with ``pinned=true`` and may answer a
# ``pinned_post_tree``): on the busy post (its 41st top-level comment, on the second page of 25), and on
# the post of each other group with the most top-level comments (the middle one). Chosen without the
# generator, so the rest of the seed stays as it was.
BUSY_PINNED_AT = 40


def _pin_comments(world: World) -> None:
    for group in world.groups.values():
        roots = [world.posts[pid] for pid in world.group_posts.get(group.id, [])]
        busy = next((p for p in roots if p.title == BUSY_TITLE), None)
        post = busy or max(roots, key=lambda p: (len(p.children), p.id), default=None)
        if post is None or not post.children:
            continue
        tops = sorted((world.posts[c] for c in post.children), key=lambda c: (c.created_us, c.id))
        tops[BUSY_PINNED_AT if busy else len(tops) // 2].pinned = True


def _seed_reads(world: World, seed: int) -> None:
    for user in world.users.values():
        share = READ_SHARE.get(user.handle)
        if share is None:
            continue
        rng = random.Random(f"{seed}:reads:{user.handle}")
        reads = world.reads.setdefault(user.id, {})
        for group in world.groups.values():
            if user.id not in group.members:
                continue
            for pid in world.group_posts.get(group.id, []):
                post = world.posts[pid]
                if rng.random() < share:
                    reads[pid] = min(world.now_us, post.created_us + rng.randint(US, 2 * DAY_US))


def _seed_channel(world: World, rng: random.Random, a: str, b: str, count: int, end_us: int) -> None:
    channel = Channel(id=hexid(rng), user_ids=(a, b), created_us=0)
    times: list[int] = []
    t = end_us
    for _ in range(count):
        times.append(t)
        t -= rng.randint(60 * US, 6 * HOUR_US)
    channel.created_us = times[-1] - US
    for t in reversed(times):
        src = a if rng.random() < 0.5 else b
        channel.append(
            Message(
                id=hexid(rng),
                channel_id=channel.id,
                src=src,
                dst=b if src == a else a,
                content=rng.choice(CHAT),
                created_us=t,
            )
        )
    for uid in (a, b):  # trailing messages from the other party may be unread
        unread = 0
        if rng.random() < 0.35:
            while unread < len(channel.messages) and channel.messages[-1 - unread].src != uid:
                unread += 1
        channel.read_upto[uid] = len(channel.messages) - unread
    world.add_channel(channel)


def _seed_chats(world: World, rng: random.Random, fixed: dict[str, str], members: list[User]) -> None:
    now = world.now_us
    alice, bob, carol, dave = fixed["alice"], fixed["bob"], fixed["carol"], fixed["dave"]
    _seed_channel(world, rng, alice, bob, 330, now - 2 * HOUR_US)
    _seed_channel(world, rng, alice, carol, 14, now - 3 * DAY_US)
    _seed_channel(world, rng, alice, dave, 8, now - 9 * DAY_US)
    _seed_channel(world, rng, bob, carol, 6, now - DAY_US)
    for member in members[:197]:
        _seed_channel(world, rng, alice, member.id, rng.randint(1, 10), now - rng.randint(10 * 60 * US, 180 * DAY_US))


def build_world(seed: int, now_us: int) -> World:
    """Build the whole deterministic world for ``seed``, with times ending at ``now_us``."""
    rng = random.Random(seed)
    world = World(seed=seed, now_us=now_us, build_id=f"sbx{seed}-{hexid(rng)[:12]}")
    fixed = {h: _fixed_user(h, f, last, tfa) for h, f, last, tfa in FIXED_USERS}
    members = _members(rng)
    for user in [*fixed.values(), *members]:
        world.users[user.id] = user
    ids = {h: u.id for h, u in fixed.items()}
    for slug, name, desc, labels, handles, count in GROUPS:
        gid = hexid(rng)
        member_ids = set(world.users) if handles is None else {ids[h] for h in handles}
        group = Group(
            id=gid,
            slug=slug,
            display_name=name,
            description=desc,
            created_us=now_us - 800 * DAY_US,
            members=member_ids,
            labels=[Label(id=hexid(rng), group_id=gid, display_name=lb) for lb in labels],
        )
        world.groups[gid] = group
        authors = [ids[h] for h, *_ in FIXED_USERS if ids[h] in member_ids and h != "mallory"]
        if handles is None:
            authors += [m.id for m in members[:60]]
        _seed_group(world, rng, group, count, authors, pinned=3 if handles is None else 1)
    _pin_comments(world)
    _seed_reads(world, seed)
    _seed_chats(world, rng, ids, members)
    return world
